"""nicguard: a validating admission webhook for the GKE multi-NIC wiring of Trainer objects.

The layering is pyproject.toml's import-linter contracts; docs/architecture.md explains it.
"""
