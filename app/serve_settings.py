"""Settings of ``nicguard serve`` (ports, state, TLS, certificates), on top of app.settings.

Kept apart from the composition root so ``nicguard check`` parses its flags without importing
the web stack and the Kubernetes client.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from app.settings import (
    CERT_OPTIONS,
    CertSettings,
    Option,
    SettingsError,
    add_options,
    cert_settings,
    parse_path,
    parse_period,
    parse_port,
    parse_seconds,
    parse_value,
    resolve,
)

SERVE_OPTIONS: Final = (
    Option("port", "8443", "HTTPS port of POST /validate"),
    Option("probe-port", "8080", "plain-HTTP port of /healthz, /readyz and /metrics"),
    Option("host", "0.0.0.0", "address to bind"),  # noqa: S104 - a pod serves on all interfaces
    Option("state", "", "file or directory of cluster state: file mode (unset: Kubernetes mode)"),
    Option("tls-cert", "", "serving certificate (PEM); with --tls-key"),
    Option("tls-key", "", "serving key (PEM); with --tls-cert"),
    Option("cert-dir", "certs", "where a self-signed CA and serving cert are kept/generated"),
    Option("service-name", "nicguard", "Service name, for the generated certificate's SANs"),
    Option("service-namespace", "nicguard-system", "Service namespace, for the SANs"),
    Option("client-ca", "", "require apiserver client certificates signed by this CA"),
    Option("shutdown-delay", "0", "seconds to keep serving after SIGTERM while unready"),
    Option("sync-timeout", "60", "seconds to wait for the caches before serving anyway"),
    Option("cert-period", "10", "seconds between certificate checks (Secret, caBundle, files)"),
    *CERT_OPTIONS,
)


@dataclass(frozen=True, slots=True)
class ServeOptions:
    port: int
    probe_port: int
    host: str
    state: Path | None
    tls_cert: Path | None
    tls_key: Path | None
    cert_dir: Path
    hosts: tuple[str, ...]
    client_ca: Path | None
    shutdown_delay: float
    sync_timeout: float
    cert_period: float
    certs: CertSettings | None  # the self-managed certificate controller, when on


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    add_options(parser, SERVE_OPTIONS)


def serve_options(args: argparse.Namespace, environ: Mapping[str, str]) -> ServeOptions:
    raw = resolve(args, environ, SERVE_OPTIONS)
    name = parse_value(raw, "service-name", str)
    namespace = parse_value(raw, "service-namespace", str)
    options = ServeOptions(
        port=parse_value(raw, "port", parse_port),
        probe_port=parse_value(raw, "probe-port", parse_port),
        host=parse_value(raw, "host", str),
        state=parse_value(raw, "state", parse_path),
        tls_cert=parse_value(raw, "tls-cert", parse_path),
        tls_key=parse_value(raw, "tls-key", parse_path),
        cert_dir=Path(parse_value(raw, "cert-dir", str) or "certs"),
        hosts=(
            "localhost",
            "127.0.0.1",
            name,
            f"{name}.{namespace}",
            f"{name}.{namespace}.svc",
            f"{name}.{namespace}.svc.cluster.local",
        ),
        client_ca=parse_value(raw, "client-ca", parse_path),
        shutdown_delay=parse_value(raw, "shutdown-delay", parse_seconds),
        sync_timeout=parse_value(raw, "sync-timeout", parse_seconds),
        cert_period=parse_value(raw, "cert-period", parse_period),
        certs=None,
    )
    if (options.tls_cert is None) != (options.tls_key is None):
        raise SettingsError("tls-cert and tls-key must be given together")
    kubernetes, own_tls = options.state is None, options.tls_cert is not None
    return replace(
        options, certs=cert_settings(raw, environ, kubernetes=kubernetes, own_tls=own_tls)
    )
