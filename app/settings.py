"""Settings: each is a ``--flag`` and a ``NICGUARD_*`` variable; flags win, then env, then default.

Bad values fail at start with a message naming the setting and where the value came from.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Final, TypeVar

from app.domain.cluster import ObjectName
from app.domain.policy import NotReady, OnUnverifiable, Policy

_T = TypeVar("_T")
_E = TypeVar("_E", NotReady, OnUnverifiable)

ENV_PREFIX: Final = "NICGUARD_"
LOG_LEVELS: Final = ("debug", "info", "warning", "error")


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


POLICY_OPTIONS: Final = (
    Option(
        "recipe-configmap", "nicguard-system/nicguard-recipe", "recipe ConfigMap namespace/name"
    ),
    Option("recipe-runtimes", "torch-distributed-tcpxo", "comma list of recipe-bound CTR names"),
    Option("not-ready", "deny", "deny|warn: a Network that exists but is not usable"),
    Option(
        "recipe-required", "true", "true|false: deny recipe-bound objects when the recipe is absent"
    ),
    Option("on-unverifiable", "deny", "deny|allow: when nicguard cannot decide"),
    Option("log-level", "info", "|".join(LOG_LEVELS)),
)


@dataclass(frozen=True, slots=True)
class Settings:
    """Settings shared by ``check`` and ``serve``."""

    recipe_configmap: ObjectName
    policy: Policy
    log_level: str


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
            not_ready=parse_value(raw, "not-ready", _choice(NotReady)),
            recipe_required=parse_value(raw, "recipe-required", parse_bool),
            on_unverifiable=parse_value(raw, "on-unverifiable", _choice(OnUnverifiable)),
        ),
        log_level=parse_value(raw, "log-level", _log_level),
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
        pod_name=parse_value(raw, "pod-name", str).strip()
        or environ.get("HOSTNAME")
        or socket.gethostname(),
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


def _lifetime(value: str) -> timedelta:
    seconds = int(value) if value.strip().isdigit() else 0
    if seconds < 60:
        raise ValueError("expected a whole number of seconds, at least 60")
    return timedelta(seconds=seconds)


def _name(value: str) -> str:
    if not value.strip():
        raise ValueError("expected a name")
    return value.strip()


def parse_path(value: str) -> Path | None:
    return Path(value) if value else None


def _names(value: str) -> frozenset[str]:
    names = frozenset(part.strip() for part in value.split(",") if part.strip())
    if not names:
        raise ValueError("expected a comma list of names")
    return names


def _choice(enum: type[_E]) -> Callable[[str], _E]:
    def parse(value: str) -> _E:
        try:
            return enum(value.strip().lower())
        except ValueError:
            raise ValueError(f"expected one of {', '.join(e.value for e in enum)}") from None

    return parse


def _log_level(value: str) -> str:
    lowered = value.strip().lower()
    if lowered not in LOG_LEVELS:
        raise ValueError(f"expected one of {', '.join(LOG_LEVELS)}")
    return lowered
