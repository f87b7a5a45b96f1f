"""Certificates: the serving pair, how it is issued, checked, served, reloaded and rotated.

``pem`` reads, checks and writes PEM; ``builder`` makes every certificate (CA and leaf);
``certdir`` keeps ``--cert-dir``; ``tls`` is the server SSLContext and its hot reload;
``rotation`` plans the self-managed certificates kept in a Secret (pure); ``controller`` carries
the plan out through ``api`` (the Secret and the webhook caBundles) and ``lease`` (one writer).
Only ``controller``, ``api`` and ``lease`` import ``kubernetes`` (see pyproject.toml).
"""
