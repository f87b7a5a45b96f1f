"""Fixtures for the certificate tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.certificates.certdir import CertFiles, issue_self_signed
from tests.certificates.support import SVC


@pytest.fixture
def served(tmp_path: Path) -> CertFiles:
    return issue_self_signed(tmp_path / "certs", [SVC, "::1"])
