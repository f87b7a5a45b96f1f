"""Each value changes what the chart renders as documented; the schema refuses bad values."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.render import CHART, env, one, template, template_run

SCHEMA_ERROR = "values don't meet the specifications of the schema"


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (("--set", "certificates.mode=vault"), "at '/certificates/mode': value must be one of"),
        (("--set", "settings.protect=never"), "at '/settings/protect': value must be one of"),
        (("--set", "settings.placement=order"), "at '/settings/placement': value must be one of"),
        (("--set", "settings.workloads=audit"), "at '/settings/workloads': value must be one of"),
        (("--set", "workloadDoors.enabled=no"), "at '/workloadDoors/enabled': got string"),
        (
            ("--set", "settings.enforcement=audit"),
            "at '/settings/enforcement': value must be one of",
        ),
        (("--set", "settings.notReady=maybe"), "at '/settings/notReady': value must be one of"),
        (("--set", "settings.logLevel=trace"), "at '/settings/logLevel': value must be one of"),
        (("--set-string", "replicas=two"), "at '/replicas': got string, want integer"),
        (("--set", "settings.recipeRequired=yes"), "at '/settings/recipeRequired': got string"),
        (("--set", "settings.port=0"), "at '/settings/port': minimum: got 0, want 1"),
        (("--set", "settings.syncTimeout=7200"), "at '/settings/syncTimeout': maximum"),
        (("--set", "settings.bodyBudget=2"), "at '/settings/bodyBudget'"),
        (("--set", "settings.caLifetime=30"), "at '/settings/caLifetime': 'anyOf' failed"),
        (("--set", "settings.recipeConfigMap=nicguard-recipe"), "'/settings/recipeConfigMap'"),
        (("--set", "replica=2"), "additional properties 'replica' not allowed"),
        (("--set", "settings.protection=warn"), "additional properties 'protection' not allowed"),
        (("--set", "image.pullPolicy=Sometimes"), "at '/image/pullPolicy'"),
        (("--set", "image.digest=latest"), "at '/image/digest'"),
    ],
    ids=lambda value: value[-1] if isinstance(value, tuple) else None,
)
def test_the_schema_refuses_a_bad_value(args: tuple[str, ...], complaint: str) -> None:
    run = template_run(*args)
    assert run.returncode == 1, run.stdout[-500:]
    assert SCHEMA_ERROR in run.stderr, run.stderr
    assert complaint in run.stderr, run.stderr


# (value, as in a values file) -> the NICGUARD_* variables it sets (None: absent); every other
# variable stays as by default.
SETTINGS = [
    (("settings.recipeConfigMap", "team-x/recipe"), {"NICGUARD_RECIPE_CONFIGMAP": "team-x/recipe"}),
    (("settings.recipeRuntimes", "a,b"), {"NICGUARD_RECIPE_RUNTIMES": "a,b"}),
    (("settings.rdmaRuntimes", "r1"), {"NICGUARD_RDMA_RUNTIMES": "r1"}),
    (("settings.a3UltraDranetRuntimes", "d1"), {"NICGUARD_A3_ULTRA_DRANET_RUNTIMES": "d1"}),
    (("settings.a4DranetRuntimes", "d1"), {"NICGUARD_A4_DRANET_RUNTIMES": "d1"}),
    (("settings.a4xDranetRuntimes", "d1"), {"NICGUARD_A4X_DRANET_RUNTIMES": "d1"}),
    (("settings.a4xMaxDranetRuntimes", "d1"), {"NICGUARD_A4X_MAX_DRANET_RUNTIMES": "d1"}),
    (("settings.notReady", "warn"), {"NICGUARD_NOT_READY": "warn"}),
    (("settings.recipeRequired", False), {"NICGUARD_RECIPE_REQUIRED": "false"}),
    (("settings.onUnverifiable", "allow"), {"NICGUARD_ON_UNVERIFIABLE": "allow"}),
    (("settings.enforcement", "warn"), {"NICGUARD_ENFORCEMENT": "warn"}),
    (("settings.protect", "warn"), {"NICGUARD_PROTECT": "warn"}),
    (("settings.placement", "off"), {"NICGUARD_PLACEMENT": "off"}),
    (("settings.workloads", "warn"), {"NICGUARD_WORKLOADS": "warn"}),
    (("settings.reports", "off"), {"NICGUARD_REPORTS": "off"}),
    (("settings.logLevel", "debug"), {"NICGUARD_LOG_LEVEL": "debug"}),
    (("settings.port", 9443), {"NICGUARD_PORT": "9443"}),
    (("settings.probePort", 9090), {"NICGUARD_PROBE_PORT": "9090"}),
    (("settings.host", "::"), {"NICGUARD_HOST": "::"}),
    (("settings.serviceName", "admission"), {"NICGUARD_SERVICE_NAME": "admission"}),
    (
        ("settings.clientCA", "/etc/client-ca/ca.crt"),
        {"NICGUARD_CLIENT_CA": "/etc/client-ca/ca.crt"},
    ),
    (("settings.shutdownDelay", 2.5), {"NICGUARD_SHUTDOWN_DELAY": "2.5"}),
    (("settings.syncTimeout", 120), {"NICGUARD_SYNC_TIMEOUT": "120"}),
    (("settings.certPeriod", 5), {"NICGUARD_CERT_PERIOD": "5"}),
    (("settings.bodyBudget", 64), {"NICGUARD_BODY_BUDGET": "64"}),
    (("settings.auditLease", "nicguard-system/a"), {"NICGUARD_AUDIT_LEASE": "nicguard-system/a"}),
    (
        ("settings.certSecret", "nicguard-system/tls"),
        {"NICGUARD_CERT_SECRET": "nicguard-system/tls"},
    ),
    (("settings.certLease", "nicguard-system/w"), {"NICGUARD_CERT_LEASE": "nicguard-system/w"}),
    (("settings.webhookConfiguration", "ng"), {"NICGUARD_WEBHOOK_CONFIGURATION": "ng"}),
    (("settings.caLifetime", 63072000), {"NICGUARD_CA_LIFETIME": "63072000"}),
    (("settings.certLifetime", 86400), {"NICGUARD_CERT_LIFETIME": "86400"}),
    (
        ("certificates.mode", "cert-manager"),
        {
            "NICGUARD_CERT_DIR": None,
            "NICGUARD_TLS_CERT": "/var/run/nicguard/certs/tls.crt",
            "NICGUARD_TLS_KEY": "/var/run/nicguard/certs/tls.key",
        },
    ),
]


@pytest.mark.parametrize(
    ("value", "expected"), SETTINGS, ids=[f"{s[0][0]}={s[0][1]}" for s in SETTINGS]
)
def test_a_setting_value_sets_its_variable(
    value: tuple[str, object], expected: dict[str, str | None]
) -> None:
    default = env(template())
    got = env(template("--set-json", f"{value[0]}={json.dumps(value[1])}"))
    want = {k: v for k, v in {**default, **expected}.items() if v is not None}
    assert got == want


def test_numbers_of_a_values_file_are_written_as_given(tmp_path: Path) -> None:
    """A values file's numbers reach the chart as floats: whole ones must not become 6.3072e+07."""
    values = {"settings": {"caLifetime": 63072000, "shutdownDelay": 0.5, "certPeriod": 30}}
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    got = env(template("-f", str(tmp_path / "values.yaml")))
    assert (got["NICGUARD_CA_LIFETIME"], got["NICGUARD_SHUTDOWN_DELAY"]) == ("63072000", "0.5")
    assert got["NICGUARD_CERT_PERIOD"] == "30"


def pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(docs, "Deployment")["spec"]["template"]["spec"]
    return spec


def test_scheduling_values_reach_the_pod_spec() -> None:
    values = {
        "replicas": 2,
        "resources": {"requests": {"cpu": "50m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
        "nodeSelector": {"pool": "system"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
        "topologySpreadConstraints": [
            {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
        ],
        "priorityClassName": "high",
        "podAnnotations": {"example.com/scrape": "yes"},
        "podLabels": {"team": "platform"},
        "imagePullSecrets": [{"name": "regcred"}],
        "terminationGracePeriodSeconds": 45,
    }
    docs = template(
        *(arg for k, v in values.items() for arg in ("--set-json", f"{k}={json.dumps(v)}"))
    )
    deployment = one(docs, "Deployment")
    spec = pod_spec(docs)
    assert deployment["spec"]["replicas"] == 2
    assert spec["containers"][0]["resources"] == values["resources"]
    for field in ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints"):
        assert spec[field] == values[field], field
    assert spec["priorityClassName"] == "high"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["terminationGracePeriodSeconds"] == 45
    metadata = deployment["spec"]["template"]["metadata"]
    assert metadata["annotations"] == {"example.com/scrape": "yes"}
    assert metadata["labels"]["team"] == "platform"
    # The quota exists for system-cluster-critical only.
    assert not [d for d in docs if d["kind"] == "ResourceQuota"]


@pytest.mark.parametrize(
    ("args", "image", "policy"),
    [
        ((), "nicguard:0.1.0", "IfNotPresent"),
        (
            ("--set", "image.repository=r.example/ng", "--set", "image.tag=1.2"),
            "r.example/ng:1.2",
            None,
        ),
        (("--set", f"image.digest=sha256:{'a' * 64}"), f"nicguard:0.1.0@sha256:{'a' * 64}", None),
        (("--set", "image.pullPolicy=Always"), "nicguard:0.1.0", "Always"),
    ],
)
def test_the_image(args: tuple[str, ...], image: str, policy: str | None) -> None:
    (container,) = pod_spec(template(*args))["containers"]
    assert container["image"] == image
    assert container["imagePullPolicy"] == (policy or "IfNotPresent")


def test_optional_objects_can_be_left_out() -> None:
    """Namespace, example recipe and the group binding are off by default; the rest can be."""
    values = ["podDisruptionBudget.enabled=false", "criticalPodsQuota.create=false"]
    kinds = {(d["kind"], d["metadata"]["name"]) for d in template(*(f"--set={v}" for v in values))}
    for gone in [
        ("Namespace", "nicguard-system"),
        ("ConfigMap", "nicguard-recipe"),
        ("PodDisruptionBudget", "nicguard"),
        ("ClusterRoleBinding", "nicguard-break-glass-editor"),
        ("ResourceQuota", "nicguard-critical-pods"),
    ]:
        assert gone not in kinds, gone
    assert ("ClusterRole", "nicguard-break-glass-editor") in kinds


WORKLOAD_DOORS = ["workloads.nicguard.dev", "pods.nicguard.dev"]


@pytest.mark.parametrize(("enabled", "doors"), [("true", WORKLOAD_DOORS), ("false", [])])
def test_the_workload_doors_can_be_left_out(enabled: str, doors: list[str]) -> None:
    """The emergency switch of docs/operations.md: the two entries go, the others stay."""
    docs = template("--set", f"workloadDoors.enabled={enabled}")
    names = [hook["name"] for hook in one(docs, "ValidatingWebhookConfiguration")["webhooks"]]
    assert names == [
        "validate.nicguard.dev",
        "protect.nicguard.dev",
        "recipe.nicguard.dev",
        "snapshot.nicguard.dev",
        "claimtemplates.nicguard.dev",
        *doors,
    ]


def test_moving_the_recipe_moves_its_role_webhook_and_example() -> None:
    """The four places manifests/README.md lists change together."""
    docs = template(
        "--set", "settings.recipeConfigMap=aicr/my-recipe", "--set", "exampleRecipe.create=true"
    )  # fmt: skip
    assert env(docs)["NICGUARD_RECIPE_CONFIGMAP"] == "aicr/my-recipe"
    role = one(docs, "Role", "nicguard")
    assert role["metadata"]["namespace"] == "aicr"
    assert role["rules"][0]["resourceNames"] == ["my-recipe"]
    assert one(docs, "RoleBinding", "nicguard")["metadata"]["namespace"] == "aicr"
    recipe = one(docs, "ConfigMap", "my-recipe")
    assert recipe["metadata"]["namespace"] == "aicr"
    hook = one(docs, "ValidatingWebhookConfiguration")["webhooks"][2]
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["aicr"]
    assert "metadata.name == 'my-recipe'" in hook["matchConditions"][0]["expression"]


def test_the_doctor_roles_follow_the_recipe_and_the_webhook_configuration() -> None:
    """``rbac.doctorRoles``: the recipe's list where the recipe is, the configuration by its name
    (docs/doctor.md, Rights)."""
    docs = template(
        "--set", "rbac.doctorRoles=true",
        "--set", "settings.recipeConfigMap=aicr/my-recipe",
        "--set", "settings.webhookConfiguration=ng",
    )  # fmt: skip
    recipe = one(docs, "Role", "nicguard-doctor-recipe")
    assert recipe["metadata"]["namespace"] == "aicr"
    assert recipe["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["my-recipe"],
            "verbs": ["list"],
        }
    ]
    (own,) = one(docs, "Role", "nicguard-doctor-namespace")["rules"]
    assert own["resources"] == ["deployments"]
    rules = one(docs, "ClusterRole", "nicguard-doctor")["rules"]
    (configuration,) = (r for r in rules if r["resources"] == ["validatingwebhookconfigurations"])
    assert configuration["resourceNames"] == ["ng"]
    assert not any(d["metadata"]["name"].startswith("nicguard-doctor") for d in template())


def test_another_release_namespace_is_used_everywhere() -> None:
    """nicguard's built-in names point at nicguard-system: elsewhere the chart passes its own."""
    docs = template(namespace="platform")
    variables = env(docs)
    for name, ref in [
        ("NICGUARD_RECIPE_CONFIGMAP", "platform/nicguard-recipe"),
        ("NICGUARD_AUDIT_LEASE", "platform/nicguard-auditor"),
        ("NICGUARD_CERT_SECRET", "platform/nicguard-tls"),
        ("NICGUARD_CERT_LEASE", "platform/nicguard-cert-writer"),
    ]:
        assert variables[name] == ref
    assert "nicguard-system" not in yaml.safe_dump_all(docs)


def test_the_service_name_names_the_service_and_the_webhooks_target() -> None:
    docs = template("--set", "settings.serviceName=admission")
    assert one(docs, "Service")["metadata"]["name"] == "admission"
    for hook in one(docs, "ValidatingWebhookConfiguration")["webhooks"]:
        assert hook["clientConfig"]["service"]["name"] == "admission"


def test_bring_your_own_certificates() -> None:
    docs = template(
        "--set",
        "certificates.mode=bring-your-own",
        "--set",
        "certificates.bringYourOwn.secretName=my-tls",
        "--set",
        "certificates.bringYourOwn.caBundle=Q0E=",
    )
    for hook in one(docs, "ValidatingWebhookConfiguration")["webhooks"]:
        assert hook["clientConfig"]["caBundle"] == "Q0E="
    volumes = {v["name"]: v for v in pod_spec(docs)["volumes"]}
    assert volumes["certs"]["secret"] == {"secretName": "my-tls", "defaultMode": 0o440}
    assert "NICGUARD_TLS_CERT" in env(docs)
    names = {d["metadata"]["name"] for d in docs}
    assert "nicguard-cert-controller" not in names
    assert not [d for d in docs if d["apiVersion"].startswith("cert-manager.io/")]


@pytest.mark.parametrize(
    ("missing", "value"),
    [
        ("caBundle", "certificates.bringYourOwn.secretName=my-tls"),
        ("secretName", "certificates.bringYourOwn.caBundle=Q0E="),
    ],
)
def test_bring_your_own_without_its_parts_fails(missing: str, value: str) -> None:
    run = template_run("--set", "certificates.mode=bring-your-own", "--set", value)
    assert run.returncode == 1
    assert f"certificates.bringYourOwn.{missing} is required" in run.stderr, run.stderr


def test_monitoring_is_off_by_default() -> None:
    kinds = {d["kind"] for d in template()}
    assert not kinds & {"ServiceMonitor", "PrometheusRule"}
    assert not [d for d in template() if d["metadata"]["name"] == "nicguard-dashboard"]


def test_the_service_monitor_scrapes_the_metrics_port() -> None:
    docs = template(
        "--set", "monitoring.serviceMonitor.enabled=true",
        "--set", "monitoring.serviceMonitor.interval=15s",
        "--set", "monitoring.serviceMonitor.labels.release=prometheus",
    )  # fmt: skip
    monitor = one(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    service = one(docs, "Service")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["interval"], endpoint["path"]) == (
        "metrics",
        "15s",
        "/metrics",
    )
    assert "metrics" in {p["name"] for p in service["spec"]["ports"]}


@pytest.fixture
def chart_copy(tmp_path: Path) -> Path:
    """The chart with files/ of this test's own (the monitoring files are another change's)."""
    copy = tmp_path / "nicguard"
    shutil.copytree(CHART, copy, ignore=shutil.ignore_patterns("files"))
    (copy / "files").mkdir()
    return copy


RULES = {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up == 0", "for": "5m"}]}]}


def test_the_prometheus_rule_carries_the_groups_of_the_rule_file(chart_copy: Path) -> None:
    (chart_copy / "files" / "prometheus-rules.yaml").write_text(yaml.safe_dump(RULES))
    args = ["--set", "monitoring.prometheusRule.enabled=true"]
    rule = one(
        template(*args, "--set", "monitoring.prometheusRule.labels.r=p", chart=chart_copy),
        "PrometheusRule",
    )
    assert rule["spec"] == RULES
    assert rule["metadata"]["labels"]["r"] == "p"


def test_the_shipped_rule_file_renders_into_the_prometheus_rule() -> None:
    shipped = CHART / "files" / "prometheus-rules.yaml"
    if not shipped.exists():
        pytest.fail(f"{shipped} is missing")
    rule = one(template("--set", "monitoring.prometheusRule.enabled=true"), "PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(shipped.read_text())["groups"]


def test_the_dashboard_config_map_carries_the_dashboard(chart_copy: Path) -> None:
    dashboard = json.dumps({"title": "nicguard", "panels": []}, indent=2)
    (chart_copy / "files" / "grafana-dashboard.json").write_text(dashboard)
    args = [
        "--set",
        "monitoring.dashboard.enabled=true",
        "--set",
        "monitoring.dashboard.labelKey=dash",
    ]
    config = one(template(*args, chart=chart_copy), "ConfigMap", "nicguard-dashboard")
    assert config["metadata"]["labels"]["dash"] == "1"
    assert json.loads(config["data"]["nicguard.json"]) == json.loads(dashboard)


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("monitoring.prometheusRule.enabled", "files/prometheus-rules.yaml"),
        ("monitoring.dashboard.enabled", "files/grafana-dashboard.json"),
    ],
)
def test_monitoring_without_its_file_fails_clearly(chart_copy: Path, value: str, path: str) -> None:
    run = template_run("--set", f"{value}=true", chart=chart_copy)
    assert run.returncode == 1
    assert f"{path} is missing from the chart: it is needed by {value}" in run.stderr, run.stderr


def test_a_rule_file_without_groups_fails_clearly(chart_copy: Path) -> None:
    (chart_copy / "files" / "prometheus-rules.yaml").write_text("rules: []\n")
    run = template_run("--set", "monitoring.prometheusRule.enabled=true", chart=chart_copy)
    assert run.returncode == 1
    assert "has no top-level list `groups:`" in run.stderr, run.stderr
