"""The e2e tier and its harness (control plane, processes, nicguard, objects, faults).

The harness modules are a library: ``bench`` and ``scripts`` import them as ``tests.e2e.*`` when
run as modules from the repository root (``python -m bench.e2e``, ``python -m scripts.demo``).
"""
