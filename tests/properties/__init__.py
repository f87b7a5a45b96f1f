"""Property-based tests (hypothesis) of the parsers, the overlay, the rules and the endpoint.

Arbitrary JSON, YAML-ish text and bytes never raise out of the core or yield a 5xx, and a
denied object never becomes allowed when a violating field is made worse. The default
``ci`` profile (see ``conftest.py``) is derandomized so CI runs are reproducible.
"""
