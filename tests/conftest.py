"""Tier and tool markers: what a test needs beyond the venv, and how `make` gets it.

A bare ``pytest`` runs neither the e2e nor the slow tier (pyproject's addopts). A test that needs
a tool fails, naming the tool and the make target that provides it; it never skips.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Final

import pytest

from tests.support.examples import register_profiles

TESTS: Final = Path(__file__).resolve().parent
# Where each tool is needed: a folder or a module under tests/, and its marker.
_NEEDS: Final = (
    ("chart", "needs_helm"),
    ("differential", "needs_oracle"),
    ("e2e/test_helm.py", "needs_helm"),
    ("monitoring/test_rules.py", "needs_promtool"),
    ("test_image_replay.py", "needs_root"),
)
# The mark expressions of the tiers `-n auto` leaves in one process (`make e2e`, `make slow`,
# `make chain`).
ONE_PROCESS_TIERS: Final = frozenset({"e2e", "slow", "chain"})

# Here, in the conftest pytest loads first: before the Hypothesis plugin reads --hypothesis-profile.
register_profiles()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (pyproject's addopts) spreads the fast tier over the cores (xdist's count);
    the e2e and slow tiers run in one process: they start control planes and time windows."""
    return 0 if str(config.option.markexpr).strip() in ONE_PROCESS_TIERS else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        where = Path(str(item.path)).relative_to(TESTS).as_posix()
        for place, marker in _NEEDS:
            if where == place or where.startswith(f"{place}/"):
                item.add_marker(marker)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("needs_promtool") and shutil.which("promtool") is None:
        pytest.fail("needs promtool on PATH: `make promtool` installs it (Debian's prometheus)")
    if item.get_closest_marker("needs_root"):
        missing = [name for name in ("strace", "setpriv") if shutil.which(name) is None]
        if missing:
            pytest.fail(f"needs {', '.join(missing)}: `make strace` installs them with apt-get")
        if os.geteuid() != 0:
            pytest.fail("needs root (builds a root-owned tree, drops to uid 65532): run as root")
