"""Configuration in-process: precedence, parsing, defaults, and one-line errors (app.config)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from app.cli import build_parser
from app.config import (
    POLICY_OPTIONS,
    SERVE_OPTIONS,
    ServeOptions,
    Settings,
    SettingsError,
    serve_options,
    settings_from,
)
from app.domain.cluster import ObjectName
from app.domain.policy import Enforcement, NotReady, OnUnverifiable, Placement, Policy


def _settings(*flags: str, env: dict[str, str] | None = None) -> Settings:
    args = build_parser().parse_args(["check", "--state", "s", *flags, "f.yaml"])
    return settings_from(args, env or {})


def _serve(*flags: str, env: dict[str, str] | None = None) -> ServeOptions:
    args = build_parser().parse_args(["serve", *flags])
    return serve_options(args, env or {"HOSTNAME": "pod-0"})


def test_defaults_are_the_policys_own() -> None:
    settings = _settings()
    assert settings == settings_from(build_parser().parse_args(["check", "--state", "s", "f"]), {})
    assert settings.policy == Policy()
    assert settings.recipe_configmap == ObjectName("nicguard-system", "nicguard-recipe")
    assert settings.log_level == "info"


def test_a_flag_wins_over_the_environment_which_wins_over_the_default() -> None:
    env = {"NICGUARD_NOT_READY": "warn", "NICGUARD_ON_UNVERIFIABLE": "allow"}
    policy = _settings("--not-ready", "DENY", env=env).policy
    assert (policy.not_ready, policy.on_unverifiable) == (NotReady.DENY, OnUnverifiable.ALLOW)


@pytest.mark.parametrize(
    ("flags", "env", "expected"),
    [
        pytest.param([], {}, Enforcement.DENY, id="default"),
        pytest.param([], {"NICGUARD_ENFORCEMENT": " Warn "}, Enforcement.WARN, id="env"),
        pytest.param(
            ["--enforcement", "deny"], {"NICGUARD_ENFORCEMENT": "warn"}, Enforcement.DENY, id="flag"
        ),
    ],
)
def test_enforcement_is_a_flag_and_a_variable(
    flags: list[str], env: dict[str, str], expected: Enforcement
) -> None:
    assert _settings(*flags, env=env).policy.enforcement is expected


@pytest.mark.parametrize(
    ("flags", "env", "expected"),
    [
        pytest.param([], {}, Placement.DENY, id="default"),
        pytest.param([], {"NICGUARD_PLACEMENT": "off"}, Placement.OFF, id="env"),
        pytest.param(
            ["--placement", "warn"], {"NICGUARD_PLACEMENT": "off"}, Placement.WARN, id="flag"
        ),
    ],
)
def test_placement_is_a_flag_and_a_variable(
    flags: list[str], env: dict[str, str], expected: Placement
) -> None:
    assert _settings(*flags, env=env).policy.placement is expected


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ("a3-ultra-dranet-runtimes", "a3_ultra_dranet_runtimes"),
        ("a4-dranet-runtimes", "a4_dranet_runtimes"),
        ("a4x-dranet-runtimes", "a4x_dranet_runtimes"),
        ("a4x-max-dranet-runtimes", "a4x_max_dranet_runtimes"),
    ],
)
@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [
        pytest.param(None, None, frozenset[str](), id="default-empty"),
        pytest.param(None, " a, b ,", frozenset({"a", "b"}), id="env"),
        pytest.param("c", "a", frozenset({"c"}), id="flag"),
        pytest.param(None, " , ", frozenset[str](), id="empty-list-binds-none"),
    ],
)
def test_each_dra_profile_binds_runtimes_by_a_comma_list_setting(
    setting: str, field: str, flag: str | None, env: str | None, expected: frozenset[str]
) -> None:
    flags = [] if flag is None else [f"--{setting}", flag]
    variables = {} if env is None else {"NICGUARD_" + setting.upper().replace("-", "_"): env}
    assert getattr(_settings(*flags, env=variables).policy, field) == expected


@pytest.mark.parametrize(
    ("flags", "env", "message"),
    [
        pytest.param(
            ["--recipe-runtimes", " , "],
            {},
            "invalid recipe-runtimes ' , ' (from --recipe-runtimes): expected a comma list of "
            "names",
            id="empty-list",
        ),
        pytest.param(
            [],
            {"NICGUARD_RECIPE_REQUIRED": "yes"},
            "invalid recipe-required 'yes' (from NICGUARD_RECIPE_REQUIRED): expected true or false",
            id="bool",
        ),
        pytest.param(
            ["--log-level", "trace"],
            {},
            "invalid log-level 'trace' (from --log-level): expected one of debug, info, warning, "
            "error",
            id="log-level",
        ),
        pytest.param(
            [],
            {"NICGUARD_ENFORCEMENT": "audit"},
            "invalid enforcement 'audit' (from NICGUARD_ENFORCEMENT): expected one of deny, warn",
            id="enforcement",
        ),
        pytest.param(
            ["--placement", "never"],
            {},
            "invalid placement 'never' (from --placement): expected one of deny, warn, off",
            id="placement",
        ),
        pytest.param(
            ["--recipe-configmap", "a/b/c"],
            {},
            "invalid recipe-configmap 'a/b/c' (from --recipe-configmap): expected namespace/name",
            id="object-name",
        ),
    ],
)
def test_a_bad_value_names_the_setting_and_where_it_came_from(
    flags: list[str], env: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        _settings(*flags, env=env)
    assert str(raised.value).startswith(message)


def test_serve_defaults_and_the_service_names_of_the_certificate() -> None:
    options = _serve("--state", "examples/cluster")
    assert (options.port, options.probe_port, options.host) == (8443, 8080, "0.0.0.0")  # noqa: S104
    assert (options.state, options.cert_dir) == (Path("examples/cluster"), Path("certs"))
    assert options.hosts[2:] == (
        "nicguard",
        "nicguard.nicguard-system",
        "nicguard.nicguard-system.svc",
        "nicguard.nicguard-system.svc.cluster.local",
    )
    assert options.certs is None  # file mode: no certificate controller
    assert options.body_budget == 32 * 1024 * 1024


@pytest.mark.parametrize(
    ("flags", "env", "mib"),
    [([], {"NICGUARD_BODY_BUDGET": "3"}, 3), (["--body-budget", "4096"], {}, 4096)],
)
def test_the_body_budget_is_given_in_mib(flags: list[str], env: dict[str, str], mib: int) -> None:
    assert _serve(*flags, env=env).body_budget == mib * 1024 * 1024


def test_kubernetes_mode_runs_the_certificate_controller_by_default() -> None:
    certs = _serve().certs
    assert certs is not None
    assert (certs.secret, certs.lease) == (
        ObjectName("nicguard-system", "nicguard-tls"),
        ObjectName("nicguard-system", "nicguard-cert-writer"),
    )
    assert (certs.ca_lifetime, certs.cert_lifetime) == (
        timedelta(seconds=63072000),
        timedelta(seconds=7776000),
    )
    assert certs.pod_name == "pod-0"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(["--port", "0"], "expected a TCP port 1-65535", id="port"),
        pytest.param(["--shutdown-delay", "-1"], "expected 0-3600 seconds", id="seconds"),
        pytest.param(["--cert-period", "0.5"], "expected 1-3600 seconds", id="period"),
        pytest.param(["--body-budget", "2"], "whole number of MiB, 3-4096", id="budget-min"),
        pytest.param(["--body-budget", "4097"], "whole number of MiB, 3-4096", id="budget-max"),
        pytest.param(["--body-budget", "32.5"], "whole number of MiB, 3-4096", id="budget-whole"),
        pytest.param(["--cert-dir", ""], "expected a directory", id="cert-dir"),
        pytest.param(
            ["--tls-cert", "c.pem"], "tls-cert and tls-key must be given together", id="pair"
        ),
        pytest.param(
            ["--state", "s", "--cert-controller", "true"],
            "cert-controller needs Kubernetes mode and no tls-cert/tls-key",
            id="controller-in-file-mode",
        ),
        pytest.param(
            ["--ca-lifetime", "600", "--cert-lifetime", "6000"],
            "ca-lifetime must be at least cert-lifetime",
            id="lifetimes",
        ),
        pytest.param(["--cert-lifetime", "59"], "at least 60", id="lifetime-min"),
        pytest.param(["--webhook-configuration", " "], "expected a name", id="name"),
    ],
)
def test_serve_options_fail_at_start_naming_the_setting(flags: list[str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        _serve(*flags)


def test_the_controller_can_be_turned_off_and_is_off_with_own_certificates() -> None:
    assert _serve("--cert-controller", "false").certs is None
    assert _serve("--tls-cert", "c.pem", "--tls-key", "k.pem").certs is None


def test_every_option_has_its_flag_and_variable_once() -> None:
    names = [option.name for option in (*POLICY_OPTIONS, *SERVE_OPTIONS)]
    assert len(names) == len(set(names))
    assert all(option.env == "NICGUARD_" + option.dest.upper() for option in SERVE_OPTIONS)
