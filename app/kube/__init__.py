"""Kubernetes-mode adapter: list+watch caches and API errors.

With the certificate controller and its API, the only code that imports ``kubernetes``.
"""
