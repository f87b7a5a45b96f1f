"""The e2e tier: scenarios driven with kubectl against a real kube-apiserver (tests/harness)."""
