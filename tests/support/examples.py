"""Hypothesis profiles: ``ci`` tries every property's full number of examples, ``dev`` (the
default, a bare ``pytest``) a fifth; ``make unit`` and ``make unit-py313`` pass
``--hypothesis-profile=ci``. Both are derandomized and keep no database: every run is the same."""

from __future__ import annotations

from typing import Final

from hypothesis import settings

CI: Final = "ci"
DEV: Final = "dev"
DEV_SHARE: Final = 5
"""``dev`` tries one example in ``DEV_SHARE`` of those ``ci`` tries."""


def register_profiles() -> None:
    """Register both and load ``dev``; the plugin's ``--hypothesis-profile`` is read later."""
    for name in (CI, DEV):
        settings.register_profile(
            name, derandomize=True, database=None, deadline=None, print_blob=True
        )
    settings.load_profile(DEV)


def examples(full: int) -> int:
    """A property's ``max_examples``: ``full`` under the ci profile, a fifth of it under dev."""
    return full if settings.get_current_profile_name() == CI else max(full // DEV_SHARE, 1)
