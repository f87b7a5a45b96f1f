"""Where the repository and its upstream fixtures are, for tests that read its files."""

from __future__ import annotations

from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
UPSTREAM: Final = ROOT / "tests" / "fixtures" / "upstream"
"""Real upstream objects, each headed with its source (their README lists them)."""
