"""nicguard: a validating admission webhook for GKE multi-NIC wiring of Kubeflow Trainer objects.

Layers, outermost first: ``app.cli`` -> ``app.serve`` -> ``app.certificates`` -> adapters
(``app.web``, ``app.kube``, ``app.files``) -> services (``app.decisions``, ``app.metrics``,
``app.logs``, ``app.config``) -> ``app.domain`` (pure rules, stdlib only). Imports only point
inwards.
"""
