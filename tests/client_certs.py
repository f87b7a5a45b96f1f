"""Client certificates, which only tests issue (the apiserver's, for ``--client-ca``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from app.certificates.builder import leaf
from app.certificates.certdir import CertFiles
from app.certificates.pem import (
    KeyPair,
    TLSConfigError,
    load_certificate,
    parse_private_key,
    read_file,
    write_pair,
)


def issue_client_cert(
    ca: CertFiles,
    cn: str,
    out_dir: Path,
    *,
    name: str = "client",
    days: int = 30,
    now: datetime | None = None,
) -> CertFiles:
    """Sign a clientAuth certificate for ``cn`` with ``ca``'s CA; writes ``<name>.crt/.key``."""
    ca_cert = load_certificate(ca.ca)
    ca_key = parse_private_key(read_file(ca.ca_key), ca.ca_key)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TLSConfigError(f"{ca.ca_key}: not an ECDSA key")
    authority = KeyPair.new(ca_cert, ca_key)
    cert = leaf(
        authority,
        (),
        cn=cn,
        usage=ExtendedKeyUsageOID.CLIENT_AUTH,
        lifetime=timedelta(days=days),
        now=now or datetime.now(UTC),
    )
    out_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    files = CertFiles(cert=out_dir / f"{name}.crt", key=out_dir / f"{name}.key", ca=ca.ca)
    write_pair(cert, files.cert, files.key)
    return files
