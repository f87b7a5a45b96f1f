"""The real-control-plane harness: etcd and kube-apiserver, nicguard as a process, the upstream
objects, faults. The e2e tier (tests/e2e), the benchmarks and the demo import it as a library,
run as modules from the repository root (``python -m bench.e2e``, ``python -m scripts.demo``).
"""
