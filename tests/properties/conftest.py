"""Hypothesis profiles for the property tests.

``ci`` (the default) is derandomized and keeps no example database, so every run tries the
same examples; ``dev`` is randomized and remembers failures in ``.hypothesis/``. Select one
with ``HYPOTHESIS_PROFILE=dev``. Each test sets its own ``max_examples``.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
