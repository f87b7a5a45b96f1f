"""Objects whose wiring GKE's JSON decoder or Trainer's merge and ancestor label read otherwise
than a naive reading, refused by ``nicguard check`` and by file-mode ``nicguard serve`` over TLS
(docs/rules.md: InterfacesAnnotationMalformed, InterfaceNameInvalid, PatchDirectiveUnsupported,
wired templates by label); a directive elsewhere in a patch is admitted. The same objects go
through a real apiserver in tests/e2e/test_platform_reading.py."""

from __future__ import annotations

import copy
import json
import ssl
import urllib.request
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from tests.support.paths import ROOT
from tests.test_cli import nicguard
from tests.test_serve import _serve_while, restored_process_state  # noqa: F401

EXAMPLES: Final = ROOT / "examples"
INTERFACES: Final = "networking.gke.io/interfaces"
ANCESTOR: Final = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
RECIPE_PAIRS: Final = [(f"eth{i + 1}", f"gpu-nic-{i}") for i in range(8)]


def _example(relative: str) -> dict[str, Any]:
    (found,) = (d for d in yaml.safe_load_all((EXAMPLES / relative).read_text()) if d)
    return copy.deepcopy(found)


def _interfaces(pairs: list[tuple[str, str]], eth4: str | None = None) -> str:
    entries = [
        f'{{"interfaceName":"{i}","network":"{n}"}}' for i, n in [("eth0", "default"), *pairs]
    ]
    if eth4 is not None:
        entries[4] = f'{{"interfaceName":"eth4",{eth4}}}'
    return "[" + ",".join(entries) + "]"


def _trainjob(name: str, node: dict[str, Any]) -> dict[str, Any]:
    """The good TrainJob example renamed, with one runtime patch of the ``node`` entry given."""
    job = _example("objects/good-trainjob.yaml")
    job["metadata"]["name"] = name
    spec = {"replicatedJobs": [node]}
    job["spec"]["runtimePatches"] = [
        {"manager": "example.com/team-a", "trainingRuntimeSpec": {"template": {"spec": spec}}}
    ]
    return job


def _node(annotations: dict[str, str], pod_spec: dict[str, Any] | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"metadata": {"annotations": annotations}}
    if pod_spec is not None:
        pod["spec"] = pod_spec
    return {"name": "node", "template": {"spec": {"template": pod}}}


def _decoy(name: str, worker_pairs: list[tuple[str, str]] | None) -> dict[str, Any]:
    """The recipe's runtime whose wired ``node`` job lost Trainer's label, beside a labelled
    ``worker`` job (wired with ``worker_pairs``, or not at all)."""
    obj = _example("cluster/torch-distributed-tcpxo.yaml")
    obj["metadata"] = {"name": name, "labels": {"nicguard.dev/recipe-bound": "true"}}
    jobs = obj["spec"]["template"]["spec"]["replicatedJobs"]
    (node,) = (j for j in jobs if j["name"] == "node")
    worker = copy.deepcopy(node)
    node["template"]["metadata"]["labels"] = {"team": "decoy"}
    worker["name"] = "worker"
    worker["template"]["metadata"]["labels"] = dict(ANCESTOR)
    annotations = worker["template"]["spec"]["template"]["metadata"]["annotations"]
    if worker_pairs is None:
        del annotations[INTERFACES]
    else:
        annotations[INTERFACES] = _interfaces(worker_pairs)
    jobs.append(worker)
    return obj


def _escape_named() -> dict[str, Any]:
    obj = _example("cluster/torch-distributed-tcpxo.yaml")
    obj["metadata"] = {"name": "tcpxo-escape"}
    (node,) = obj["spec"]["template"]["spec"]["replicatedJobs"]
    pairs = [("eth1\\u001b[2J", "gpu-nic-0"), *RECIPE_PAIRS[1:]]  # JSON text: ESC escaped
    node["template"]["spec"]["template"]["metadata"]["annotations"][INTERFACES] = _interfaces(pairs)
    return obj


SWAPPED: Final = [*RECIPE_PAIRS[:2], RECIPE_PAIRS[3], RECIPE_PAIRS[2], *RECIPE_PAIRS[4:]]
# name -> (object, the code that refuses it, or None when admitted, and a message fragment)
REPRODUCTIONS: Final[dict[str, tuple[dict[str, Any], str | None, str]]] = {
    "shadow-key": (
        _trainjob(
            "shadow-key",
            _node(
                {
                    INTERFACES: _interfaces(
                        RECIPE_PAIRS, '"network":"gpu-nic-3","Network":"no-such-net"'
                    )
                }
            ),
        ),
        "InterfacesAnnotationMalformed",
        'entry 4 (eth4) has the key "Network", which GKE reads as "network"',
    ),
    "kelvin-sign": (
        _trainjob(
            "kelvin-sign",
            _node({INTERFACES: _interfaces(RECIPE_PAIRS, '"networ\u212a":"no-such-net"')}),
        ),
        "InterfacesAnnotationMalformed",
        'entry 4 (eth4) has the key "networ\\u212a", which GKE reads as "network"',
    ),
    "field-twice": (
        _trainjob(
            "field-twice",
            _node(
                {
                    INTERFACES: _interfaces(
                        RECIPE_PAIRS, '"network":"gpu-nic-3","network":"no-such-net"'
                    )
                }
            ),
        ),
        "InterfacesAnnotationMalformed",
        'entry 4 (eth4) gives "network" twice',
    ),
    "patch-delete": (
        _trainjob("patch-delete", _node({"$patch": "delete"})),
        "PatchDirectiveUnsupported",
        "would remove the node job's pod annotations",
    ),
    "patch-replace": (
        _trainjob("patch-replace", _node({"$patch": "replace", "team": "x"})),
        "PatchDirectiveUnsupported",
        "would replace the node job's pod annotations by the patch's",
    ),
    "decoy-unwired": (
        _decoy("decoy-unwired", None),
        "InterfacesAnnotationMissing",
        "worker job: recipe-bound, but the worker pod template has no",
    ),
    "decoy-drifted": (
        _decoy("decoy-drifted", SWAPPED),
        "MappingDivergesFromRecipe",
        "worker job: at position eth3 the object maps eth4->gpu-nic-3",
    ),
    "escape-in-a-name": (
        _escape_named(),
        "InterfaceNameInvalid",
        'entry 1 names interface "eth1\\x1b[2J"',
    ),
    "directive-in-a-container-env": (
        _trainjob(
            "directive-in-a-container-env",
            _node(
                {"team": "x"}, {"containers": [{"name": "node", "env": [{"$patch": "replace"}]}]}
            ),
        ),
        None,
        "",
    ),
}


def _refused(code: str | None, fragment: str, violations: list[tuple[str, str]]) -> None:
    if code is None:
        assert violations == []
        return
    assert violations, f"expected {code}"
    assert violations[0][0] == code
    assert fragment in violations[0][1]


def test_check_refuses_each_reproduction(tmp_path: Path) -> None:
    for name, (obj, _, _) in REPRODUCTIONS.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(obj))
    run = nicguard("check", "--state", "examples/cluster", "--output", "json", str(tmp_path))
    assert run.returncode == 1, run.stderr
    results = {r["name"]: r for r in json.loads(run.stdout)["results"]}
    names = {name: obj["metadata"]["name"] for name, (obj, _, _) in REPRODUCTIONS.items()}
    for name, (_, code, fragment) in REPRODUCTIONS.items():
        found = results[names[name]]
        _refused(code, fragment, [(v["code"], v["message"]) for v in found["violations"]])


def _review(obj: dict[str, Any]) -> bytes:
    sample = "trainjob-patch-drift" if obj["kind"] == "TrainJob" else "drifted-runtime"
    review = json.loads((EXAMPLES / "reviews" / f"{sample}.json").read_text())
    review["request"]["object"] = obj
    review["request"]["name"] = obj["metadata"]["name"]
    return json.dumps(review).encode()


def _post(url: str, context: ssl.SSLContext, body: bytes) -> dict[str, Any]:
    request = urllib.request.Request(  # noqa: S310 - a loopback https URL
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=5, context=context) as reply:  # noqa: S310
        answer: dict[str, Any] = json.loads(reply.read())
    return answer["response"]  # type: ignore[no-any-return]


@pytest.mark.usefixtures("restored_process_state")
def test_file_mode_serve_refuses_each_reproduction_over_tls(tmp_path: Path) -> None:
    def visit(url: str, _probes: str, context: ssl.SSLContext) -> dict[str, Any]:
        return {
            name: _post(url, context, _review(obj)) for name, (obj, _, _) in REPRODUCTIONS.items()
        }

    seen = _serve_while(tmp_path, visit)
    for name, (_, code, fragment) in REPRODUCTIONS.items():
        response = seen[name]
        causes = response.get("status", {}).get("details", {}).get("causes", [])
        assert response["allowed"] is (code is None), name
        _refused(code, fragment, [(c["reason"], c["message"]) for c in causes])
