"""Why the API client could not be set up, importable without the Kubernetes client itself:
``nicguard check`` catches it without paying for that import."""

from __future__ import annotations


class ClientConfigError(Exception):
    """Neither in-cluster nor kubeconfig credentials could be loaded; the text says why."""
