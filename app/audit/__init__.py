"""The continuous audit (docs/audit.md): every runtime's standing, judged as a CREATE, on demand
(``nicguard audit``) from a file state or one read of the cluster.
"""
