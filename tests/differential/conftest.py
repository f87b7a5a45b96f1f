"""The Go oracle, started once for the differential tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.differential.oracle import Oracle, oracle_path


@pytest.fixture(scope="session")
def oracle() -> Iterator[Oracle]:
    found = Oracle(oracle_path())
    yield found
    found.close()
