"""Configuration: each setting is a ``--flag`` and a ``NICGUARD_*`` variable; flag, env, default.

Bad values fail at start with one line naming the setting, the value and where it came from.
The settings of every command, then those of ``serve`` only (docs/configuration.md lists them all).
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Final, TypeVar

from app.domain.cluster import ObjectName
from app.domain.policy import (
    Enforcement,
    NotReady,
    OnUnverifiable,
    Placement,
    Policy,
    Protect,
    Workloads,
)
from app.domain.policy_reports import ReportApi
from app.domain.profiles import DRANET_PROFILES

_T = TypeVar("_T")
_E = TypeVar("_E", NotReady, OnUnverifiable, Protect, Placement, Workloads, Enforcement)

ENV_PREFIX: Final = "NICGUARD_"
REPORTS_AUTO: Final = "auto"
REPORTS_OFF: Final = "off"
LOG_LEVELS: Final = ("debug", "info", "warning", "error")
BODY_BUDGET_MIB: Final = 32
BODY_BUDGET_MIN_MIB: Final = 3  # one body of the 3 MiB limit (app/web/body.py)
BODY_BUDGET_MAX_MIB: Final = 4096


class SettingsError(ValueError):
    """A setting with a bad value; the message names it."""


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: its flag name, default and help."""

    name: str
    default: str
    help: str

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper().replace("-", "_")

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


_POLICY: Final = Policy()
"""The defaults of the verdict-shaping settings are the Policy's own (not written twice)."""

POLICY_OPTIONS: Final = (
    Option(
        "recipe-configmap", "nicguard-system/nicguard-recipe", "recipe ConfigMap namespace/name"
    ),
    Option(
        "recipe-runtimes",
        ",".join(sorted(_POLICY.recipe_runtimes)),
        "comma list of recipe-bound CTR names",
    ),
    Option(
        "rdma-runtimes",
        ",".join(sorted(_POLICY.rdma_runtimes)),
        "comma list of CTR names bound to profile a4x-gb200-rdma",
    ),
    *(
        Option(
            profile.setting,
            ",".join(sorted(profile.runtimes(_POLICY))),
            f"comma list of CTR names bound to DRA profile {profile.name}",
        )
        for profile in DRANET_PROFILES
    ),
    Option(
        "not-ready", _POLICY.not_ready.value, "deny|warn: a Network that exists but is not usable"
    ),
    Option(
        "recipe-required",
        str(_POLICY.recipe_required).lower(),
        "true|false: deny recipe-bound objects when the recipe is absent",
    ),
    Option(
        "on-unverifiable", _POLICY.on_unverifiable.value, "deny|allow: when nicguard cannot decide"
    ),
    Option(
        "enforcement",
        _POLICY.enforcement.value,
        "deny|warn: warn allows what would be denied, with its lines as warnings (rollout)",
    ),
    Option(
        "protect",
        _POLICY.protect.value,
        "deny|warn|off: deleting an in-use Network or param set, breaking the recipe",
    ),
    Option(
        "placement",
        _POLICY.placement.value,
        "deny|warn|off: an unbound template putting a recipe's Network on another interface",
    ),
    Option(
        "workloads",
        _POLICY.workloads.value,
        "deny|warn|off: JobSets, Jobs and Pods whose wiring breaks a rule",
    ),
    Option(
        "reports",
        REPORTS_AUTO,
        "auto|openreports|wgpolicyk8s|off: where the audit writes its policy reports",
    ),
    Option("log-level", "info", "|".join(LOG_LEVELS)),
)


@dataclass(frozen=True, slots=True)
class Settings:
    """Settings shared by ``check`` and ``serve``."""

    recipe_configmap: ObjectName
    policy: Policy
    log_level: str
    reports: ReportApi | str = REPORTS_AUTO
    """A report API, or ``REPORTS_AUTO`` (whichever the cluster serves) or ``REPORTS_OFF``."""


# The self-managed certificate controller of ``serve`` (manifests/README.md), on in Kubernetes mode.
CERT_OPTIONS: Final = (
    Option(
        "cert-controller", "", "true|false: self-managed certificates (Kubernetes mode default)"
    ),
    Option(
        "cert-secret", "nicguard-system/nicguard-tls", "Secret of the self-managed certificates"
    ),
    Option(
        "webhook-configuration", "nicguard", "ValidatingWebhookConfiguration to keep trusting us"
    ),
    Option("cert-lease", "nicguard-system/nicguard-cert-writer", "Lease of the certificate writer"),
    Option("ca-lifetime", "63072000", "seconds a generated CA is valid (renewed at 2/3)"),
    Option(
        "cert-lifetime", "7776000", "seconds a generated serving cert is valid (renewed at 2/3)"
    ),
    Option("pod-name", "", "this replica's identity in the Lease (unset: $HOSTNAME)"),
)


# `nicguard doctor` checks the configuration the controller keeps trusting nicguard.
WEBHOOK_CONFIGURATION: Final = next(o for o in CERT_OPTIONS if o.name == "webhook-configuration")


def webhook_configuration_of(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    """The setting ``webhook-configuration`` of a command that takes it alone."""
    raw = resolve(args, environ, (WEBHOOK_CONFIGURATION,))
    return parse_value(raw, WEBHOOK_CONFIGURATION.name, _name)


@dataclass(frozen=True, slots=True)
class CertSettings:
    """Where the self-managed certificates live and how long they last."""

    secret: ObjectName
    webhook_configuration: str
    lease: ObjectName
    ca_lifetime: timedelta
    cert_lifetime: timedelta
    pod_name: str


def add_options(parser: argparse.ArgumentParser, options: tuple[Option, ...]) -> None:
    for option in options:
        parser.add_argument(
            f"--{option.name}",
            dest=option.dest,
            default=None,
            help=f"{option.help} (env {option.env}, default {option.default or 'unset'})",
        )


def resolve(
    args: argparse.Namespace, environ: Mapping[str, str], options: tuple[Option, ...]
) -> dict[str, tuple[str, str]]:
    """Raw value and its origin for each option: flag, then environment, then default."""
    resolved = {}
    for option in options:
        flag = getattr(args, option.dest, None)
        if flag is not None:
            resolved[option.name] = (flag, f"--{option.name}")
        elif option.env in environ:
            resolved[option.name] = (environ[option.env], option.env)
        else:
            resolved[option.name] = (option.default, "default")
    return resolved


def parse_value(raw: Mapping[str, tuple[str, str]], name: str, parse: Callable[[str], _T]) -> _T:
    """Parse one resolved value; a failure names the setting, the value and its origin."""
    value, origin = raw[name]
    try:
        return parse(value)
    except ValueError as error:
        raise SettingsError(f"invalid {name} {value!r} (from {origin}): {error}") from None


def settings_from(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    raw = resolve(args, environ, POLICY_OPTIONS)
    return Settings(
        recipe_configmap=parse_value(raw, "recipe-configmap", ObjectName.parse),
        policy=Policy(
            recipe_runtimes=parse_value(raw, "recipe-runtimes", _names),
            rdma_runtimes=parse_value(raw, "rdma-runtimes", _names),
            a3_ultra_dranet_runtimes=parse_value(raw, "a3-ultra-dranet-runtimes", _some_names),
            a4_dranet_runtimes=parse_value(raw, "a4-dranet-runtimes", _some_names),
            a4x_dranet_runtimes=parse_value(raw, "a4x-dranet-runtimes", _some_names),
            a4x_max_dranet_runtimes=parse_value(raw, "a4x-max-dranet-runtimes", _some_names),
            not_ready=parse_value(raw, "not-ready", _choice(NotReady)),
            recipe_required=parse_value(raw, "recipe-required", parse_bool),
            on_unverifiable=parse_value(raw, "on-unverifiable", _choice(OnUnverifiable)),
            enforcement=parse_value(raw, "enforcement", _choice(Enforcement)),
            protect=parse_value(raw, "protect", _choice(Protect)),
            placement=parse_value(raw, "placement", _choice(Placement)),
            workloads=parse_value(raw, "workloads", _choice(Workloads)),
        ),
        log_level=parse_value(raw, "log-level", _log_level),
        reports=parse_value(raw, "reports", _reports),
    )


def cert_settings(
    raw: Mapping[str, tuple[str, str]],
    environ: Mapping[str, str],
    *,
    kubernetes: bool,
    own_tls: bool,
) -> CertSettings | None:
    """None when the controller is off: by ``cert-controller=false``, or by default in file mode
    or with ``tls-cert``/``tls-key``; turning it on explicitly there is an error."""
    if not raw["cert-controller"][0]:
        if not kubernetes or own_tls:
            return None
    elif not parse_value(raw, "cert-controller", parse_bool):
        return None
    elif not kubernetes or own_tls:
        raise SettingsError("cert-controller needs Kubernetes mode and no tls-cert/tls-key")
    ca, leaf = (
        parse_value(raw, "ca-lifetime", _lifetime),
        parse_value(raw, "cert-lifetime", _lifetime),
    )
    if ca < leaf:
        raise SettingsError("ca-lifetime must be at least cert-lifetime")
    return CertSettings(
        secret=parse_value(raw, "cert-secret", ObjectName.parse),
        webhook_configuration=parse_value(raw, "webhook-configuration", _name),
        lease=parse_value(raw, "cert-lease", ObjectName.parse),
        ca_lifetime=ca,
        cert_lifetime=leaf,
        pod_name=_pod_name(raw, environ),
    )


def _pod_name(raw: Mapping[str, tuple[str, str]], environ: Mapping[str, str]) -> str:
    return (
        parse_value(raw, "pod-name", str).strip() or environ.get("HOSTNAME") or socket.gethostname()
    )


def parse_bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError("expected true or false")


def parse_port(value: str) -> int:
    port = int(value) if value.strip().isdigit() else -1
    if not 1 <= port <= 65535:
        raise ValueError("expected a TCP port 1-65535")
    return port


def parse_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError("expected a number of seconds") from None
    if not 0 <= seconds <= 3600:
        raise ValueError("expected 0-3600 seconds")
    return seconds


def parse_period(value: str) -> float:
    seconds = parse_seconds(value)
    if seconds < 1:
        raise ValueError("expected 1-3600 seconds")
    return seconds


def _body_budget(value: str) -> int:
    """MiB, whole: at least one body of the largest size accepted (3 MiB)."""
    mib = int(value) if value.strip().isdigit() else 0
    if not BODY_BUDGET_MIN_MIB <= mib <= BODY_BUDGET_MAX_MIB:
        raise ValueError(
            f"expected a whole number of MiB, {BODY_BUDGET_MIN_MIB}-{BODY_BUDGET_MAX_MIB}"
        )
    return mib * 1024 * 1024


def _lifetime(value: str) -> timedelta:
    seconds = int(value) if value.strip().isdigit() else 0
    if seconds < 60:
        raise ValueError("expected a whole number of seconds, at least 60")
    return timedelta(seconds=seconds)


def _name(value: str) -> str:
    if not value.strip():
        raise ValueError("expected a name")
    return value.strip()


def _directory(value: str) -> Path:
    if not value.strip():
        raise ValueError("expected a directory")
    return Path(value)


def parse_path(value: str) -> Path | None:
    return Path(value) if value else None


def _names(value: str) -> frozenset[str]:
    names = _some_names(value)
    if not names:
        raise ValueError("expected a comma list of names")
    return names


def _some_names(value: str) -> frozenset[str]:
    """A comma list that may be empty (a DRA profile binds no runtime by name by default)."""
    return frozenset(part.strip() for part in value.split(",") if part.strip())


def _choice(enum: type[_E]) -> Callable[[str], _E]:
    def parse(value: str) -> _E:
        try:
            return enum(value.strip().lower())
        except ValueError:
            raise ValueError(f"expected one of {', '.join(e.value for e in enum)}") from None

    return parse


def _reports(value: str) -> ReportApi | str:
    lowered = value.strip().lower()
    if lowered in (REPORTS_AUTO, REPORTS_OFF):
        return lowered
    try:
        return ReportApi(lowered)
    except ValueError:
        choices = (REPORTS_AUTO, *(api.value for api in ReportApi), REPORTS_OFF)
        raise ValueError(f"expected one of {', '.join(choices)}") from None


def _log_level(value: str) -> str:
    lowered = value.strip().lower()
    if lowered not in LOG_LEVELS:
        raise ValueError(f"expected one of {', '.join(LOG_LEVELS)}")
    return lowered


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
    Option(
        "body-budget",
        str(BODY_BUDGET_MIB),
        "MiB of request bodies held at once; a body beyond it is refused (503)",
    ),
    Option(
        "audit-lease",
        "nicguard-system/nicguard-auditor",
        "Lease of the replica that writes audit Events and reports",
    ),
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
    body_budget: int  # bytes
    audit_lease: ObjectName
    pod_name: str  # this replica's identity in the Leases
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
        cert_dir=parse_value(raw, "cert-dir", _directory),
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
        body_budget=parse_value(raw, "body-budget", _body_budget),
        audit_lease=parse_value(raw, "audit-lease", ObjectName.parse),
        pod_name=_pod_name(raw, environ),
        certs=None,
    )
    if (options.tls_cert is None) != (options.tls_key is None):
        raise SettingsError("tls-cert and tls-key must be given together")
    kubernetes, own_tls = options.state is None, options.tls_cert is not None
    return replace(
        options, certs=cert_settings(raw, environ, kubernetes=kubernetes, own_tls=own_tls)
    )
