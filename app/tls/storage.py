"""Where a certificate set lives on disk, and atomic, mode-preserving writes of PEM files."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from app.tls.pair import TLSConfigError


@dataclass(frozen=True, slots=True)
class CertFiles:
    """Paths of a served (or client) certificate, its key, and the CA that signed it."""

    cert: Path
    key: Path
    ca: Path

    @classmethod
    def in_dir(cls, cert_dir: Path) -> CertFiles:
        return cls(cert=cert_dir / "tls.crt", key=cert_dir / "tls.key", ca=cert_dir / "ca.crt")

    @property
    def ca_key(self) -> Path:
        """The CA's private key, kept next to ``ca`` by ``issue_self_signed``."""
        return self.ca.with_name("ca.key")


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Readers see the old file or the new one, never a partial write."""
    try:
        # mkstemp creates the file 0600, so key bytes are never readable by others, even briefly.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise TLSConfigError(f"{path}: cannot write ({exc.strerror})") from exc
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), mode)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise TLSConfigError(f"{path}: cannot write ({exc.strerror})") from exc
        raise


def write_cert(path: Path, cert: x509.Certificate) -> None:
    write_atomic(path, cert.public_bytes(serialization.Encoding.PEM), 0o644)


def write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    write_atomic(path, pem, 0o600)
