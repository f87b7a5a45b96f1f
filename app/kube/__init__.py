"""Kubernetes-mode adapter: list+watch caches. The only package that imports ``kubernetes``."""
