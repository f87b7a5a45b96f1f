"""TLS for the webhook: self-signed cert dir, pair checks, the server SSLContext, hot reload, and
the rotation of self-managed certificates kept in a Secret (``rotation``, ``secret_certs``).

Uses only ``cryptography``, ``uvicorn`` and the stdlib; see ``app.tls.context`` for uvicorn.
"""

from app.tls.authority import issue_client_cert, issue_self_signed, required_sans
from app.tls.certdir import ensure_cert_dir
from app.tls.context import TLS12_CIPHERS, make_uvicorn_config, server_ssl_context
from app.tls.pair import CertInfo, TLSConfigError, check_pair
from app.tls.reloader import CertReloader
from app.tls.rotation import Lifetimes, Plan, plan_rotation
from app.tls.secret_certs import SecretCertificates, verifies
from app.tls.storage import CertFiles

__all__ = [
    "TLS12_CIPHERS",
    "CertFiles",
    "CertInfo",
    "CertReloader",
    "Lifetimes",
    "Plan",
    "SecretCertificates",
    "TLSConfigError",
    "check_pair",
    "ensure_cert_dir",
    "issue_client_cert",
    "issue_self_signed",
    "make_uvicorn_config",
    "plan_rotation",
    "required_sans",
    "server_ssl_context",
    "verifies",
]
