"""The Helm chart (charts/nicguard) against the kustomize manifests, its schema and its README."""
