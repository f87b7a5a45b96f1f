"""The Go oracle, started once for the differential tests; Hypothesis profiles as for the
property tests (``tests/properties/conftest.py``: ``ci`` derandomized by default)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import tests.properties.conftest  # noqa: F401 - registers and loads the Hypothesis profiles
from tests.differential.oracle import Oracle, oracle_path


@pytest.fixture(scope="session")
def oracle() -> Iterator[Oracle]:
    found = Oracle(oracle_path())
    yield found
    found.close()
