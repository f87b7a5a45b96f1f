"""The harness trusts the apiserver's certificate only once it is written whole: read while the
apiserver writes it in place, an empty or partial file must mean "not yet", never a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.certificates.certdir import issue_self_signed
from tests.harness.controlplane import ControlPlane


def _written(plane: ControlPlane, text: str | None) -> ControlPlane:
    if text is not None:
        plane.cert_dir.mkdir(parents=True, exist_ok=True)
        plane.ca_file.write_text(text)
    return plane


@pytest.mark.parametrize(
    ("what", "text"),
    [
        ("absent", None),
        ("empty", ""),
        ("cut short", "-----BEGIN CERTIFICATE-----\nMIIB\n"),
    ],
)
def test_no_trust_until_the_certificate_is_whole(
    tmp_path: Path, what: str, text: str | None
) -> None:
    plane = _written(ControlPlane(tmp_path, bin_dir=tmp_path), text)
    assert plane.trust() is None, what
    assert plane.apiserver_ready() is False


def test_trust_once_written(tmp_path: Path) -> None:
    files = issue_self_signed(tmp_path / "issued", ["127.0.0.1"])
    plane = _written(ControlPlane(tmp_path, bin_dir=tmp_path), files.ca.read_text())
    context = plane.trust()
    assert context is not None
    assert len(context.get_ca_certs()) == 1
