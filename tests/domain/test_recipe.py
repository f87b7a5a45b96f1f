"""Reading the recipe ConfigMap and AICR's validation of its mapping (app.domain.recipe)."""

from __future__ import annotations

import json

import pytest
import yaml

from app.documents import load_yaml
from app.domain.annotation import InterfaceRef
from app.domain.recipe import Recipe, recipe_from_configmap
from tests.builders import PAIRS, TCPXO_MANIFEST, Pair, entries, plain_recipe, recipe_result

MAPPING = tuple(InterfaceRef(name, net) for name, net in PAIRS)
REVERSED = tuple(reversed(PAIRS))
PLAIN_YAML = "\n".join(f"- interfaceName: {n}\n  network: {net}" for n, net in PAIRS)


def _read(data: dict[str, object]) -> Recipe:
    return recipe_from_configmap(data, ref="ns/recipe@7", load_yaml=load_yaml)


def _yaml(document: object) -> str:
    return yaml.safe_dump(document)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param({"tcpxoInterfaces": PLAIN_YAML}, MAPPING, id="plain-yaml"),
        pytest.param(plain_recipe(), MAPPING, id="plain-json"),
        pytest.param(
            plain_recipe(REVERSED),
            tuple(InterfaceRef(n, net) for n, net in REVERSED),
            id="order-preserved",
        ),
        pytest.param(
            plain_recipe() | {"format": "yaml", "x": "1"}, MAPPING, id="other-keys-ignored"
        ),
        pytest.param({"recipe.yaml": _yaml(recipe_result())}, MAPPING, id="recipe-yaml"),
        pytest.param({"snapshot.yaml": _yaml(recipe_result())}, MAPPING, id="snapshot-yaml"),
        pytest.param({"snapshot.json": json.dumps(recipe_result())}, MAPPING, id="snapshot-json"),
        pytest.param(
            {"recipe.yaml": _yaml(recipe_result(configuration=PAIRS))},
            MAPPING,
            id="matching-configuration",
        ),
        pytest.param(
            {"recipe.yaml": _yaml(recipe_result(enabled="false"))},
            MAPPING,
            id="string-false-is-enabled",
        ),
        pytest.param(
            {"recipe.yaml": _yaml(recipe_result(enabled=0))}, MAPPING, id="zero-is-enabled"
        ),
        pytest.param(
            {"recipe.yaml": _yaml(recipe_result(enabled=True))}, MAPPING, id="true-is-enabled"
        ),
        pytest.param(
            {"recipe.yaml": _yaml({"configuration": {"gke": {}}} | recipe_result())},
            MAPPING,
            id="gke-configuration-without-mapping",
        ),
    ],
)
def test_a_delivering_recipe_yields_its_mapping_in_recorded_order(
    data: dict[str, object], expected: tuple[InterfaceRef, ...]
) -> None:
    assert _read(data) == Recipe(ref="ns/recipe@7", mapping=expected)


def _trainer_refs(*refs: object) -> str:
    return _yaml({"kind": "RecipeResult", "componentRefs": list(refs)})


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(
            {"recipe.yaml": _yaml(recipe_result(manifests=()))}, id="manifest-not-shipped"
        ),
        pytest.param(
            {"recipe.yaml": _yaml(recipe_result(override_pairs=None, manifests=("other.yaml",)))},
            id="neither-manifest-nor-override",
        ),
        pytest.param({"recipe.yaml": _yaml(recipe_result(enabled=False))}, id="component-disabled"),
        pytest.param({"snapshot.yaml": "kind: RecipeResult\n"}, id="no-component-refs"),
        pytest.param({"recipe.yaml": _trainer_refs({"name": "gpu-operator"})}, id="no-trainer"),
        pytest.param(
            {"recipe.yaml": _trainer_refs("junk", {"name": "kubeflow-trainer"})},
            id="trainer-without-manifests",
        ),
        pytest.param(
            {
                "recipe.yaml": _trainer_refs(
                    {"name": "kubeflow-trainer", "overrides": {"enabled": False}},
                    {"name": "kubeflow-trainer", "manifestFiles": ["other.yaml"]},
                )
            },
            id="first-enabled-trainer-decides",
        ),
    ],
)
def test_a_recipe_that_does_not_ship_the_tcpxo_runtime_delivers_nothing(
    data: dict[str, object],
) -> None:
    assert _read(data) == Recipe(ref="ns/recipe@7")


def test_a_later_trainer_component_counts_when_the_first_is_disabled() -> None:
    disabled = {"name": "kubeflow-trainer", "overrides": {"enabled": False}}
    enabled = {
        "name": "kubeflow-trainer",
        "manifestFiles": [TCPXO_MANIFEST],
        "overrides": {"tcpxoInterfaces": entries(PAIRS)},
    }
    assert _read({"recipe.yaml": _trainer_refs(disabled, enabled)}).mapping == MAPPING


def _plain(pairs: list[Pair]) -> dict[str, object]:
    return dict(plain_recipe(pairs))


def _replace(index: int, pair: Pair) -> list[Pair]:
    changed = list(PAIRS)
    changed[index] = pair
    return changed


NAME_42 = "a-gpu-nic-" + "x" * 32
NAME_41 = "a-gpu-nic-" + "x" * 31


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        pytest.param(
            {},
            "exactly one of tcpxoInterfaces, interfaces, recipe.yaml, snapshot.yaml",
            id="no-key",
        ),
        pytest.param({"other": "x"}, "(found: none)", id="only-other-keys"),
        pytest.param(
            plain_recipe() | {"recipe.yaml": _yaml(recipe_result())},
            "(found: tcpxoInterfaces, recipe.yaml)",
            id="two-keys",
        ),
        pytest.param(
            {"tcpxoInterfaces": 5}, "data key tcpxoInterfaces is not a string", id="bytes"
        ),
        pytest.param({"tcpxoInterfaces": "[a: b"}, "is not valid YAML", id="invalid-yaml"),
        pytest.param({"recipe.yaml": "{{{"}, "recipe.yaml is not valid YAML", id="invalid-recipe"),
        pytest.param({"tcpxoInterfaces": "a: b"}, "must be a list of", id="plain-not-a-list"),
        pytest.param(
            {"tcpxoInterfaces": "[x]"}, "entry 0 must carry non-empty", id="entry-not-map"
        ),
        pytest.param(
            {"tcpxoInterfaces": json.dumps([{"interfaceName": "eth1", "network": 1}])},
            "entry 0 must carry non-empty interfaceName and network strings",
            id="non-string-network",
        ),
        pytest.param(_plain(list(PAIRS[:7])), "exactly 8 entries", id="seven"),
        pytest.param(_plain([*PAIRS, ("eth9", "gpu-nic-8")]), "got 9", id="nine"),
        pytest.param(_plain([]), "got 0", id="empty-list"),
        pytest.param(_plain(_replace(7, ("eth9", "gpu-nic-7"))), '"eth9"', id="eth9"),
        pytest.param(_plain(_replace(0, ("eth0", "gpu-nic-0"))), '"eth0"', id="eth0"),
        pytest.param(_plain(_replace(0, ("ens1", "gpu-nic-0"))), "one of eth1..eth8", id="ens1"),
        pytest.param(
            _plain(_replace(1, ("eth1", "gpu-nic-1"))),
            "duplicate interface name eth1",
            id="dup-name",
        ),
        pytest.param(
            _plain(_replace(2, ("eth3", "default"))), '"default" is reserved', id="default"
        ),
        pytest.param(
            _plain(_replace(2, ("eth3", "GPU-NIC-2"))), "invalid Network name", id="upper"
        ),
        pytest.param(
            _plain(_replace(2, ("eth3", "gpu_nic_2"))), "invalid Network name", id="underscore"
        ),
        pytest.param(
            _plain(_replace(2, ("eth3", "0gpu-nic"))), "invalid Network name", id="digit-first"
        ),
        pytest.param(
            _plain(_replace(2, ("eth3", "gpu-nic-"))), "invalid Network name", id="dash-last"
        ),
        pytest.param(_plain(_replace(2, ("eth3", NAME_42))), "use 1-41 lowercase", id="42-chars"),
        pytest.param(
            _plain(_replace(2, ("eth3", "vpc3"))), 'must contain "gpu-nic"', id="no-gpu-nic"
        ),
        pytest.param(
            _plain(_replace(2, ("eth3", "gpu-nic-0"))), "duplicate network gpu-nic-0", id="dup-net"
        ),
        pytest.param(
            {"recipe.yaml": "- a\n"}, "does not hold a RecipeResult object", id="result-list"
        ),
        pytest.param(
            {"snapshot.yaml": "kind: Snapshot\napiVersion: aicr.run/v1alpha1\nmeasurements: []\n"},
            'data key snapshot.yaml is not a RecipeResult (kind "Snapshot")',
            id="aicr-snapshot",
        ),
        pytest.param(
            {"recipe.yaml": _yaml({"componentRefs": recipe_result()["componentRefs"]})},
            "data key recipe.yaml is not a RecipeResult (no kind)",
            id="no-kind",
        ),
        pytest.param(
            {"snapshot.json": '{"kind": "RecipeResults"}'},
            'data key snapshot.json is not a RecipeResult (kind "RecipeResults")',
            id="json-wrong-kind",
        ),
        pytest.param(
            {"snapshot.json": _yaml(recipe_result()), "snapshot.yaml": _yaml(recipe_result())},
            "exactly one of tcpxoInterfaces, interfaces, recipe.yaml, snapshot.yaml, snapshot.json "
            "(found: snapshot.yaml, snapshot.json)",
            id="two-result-keys",
        ),
        pytest.param(
            {"recipe.yaml": "kind: RecipeResult\ncomponentRefs: {name: kubeflow-trainer}\n"},
            "componentRefs is not a list",
            id="refs-not-a-list",
        ),
        pytest.param(
            {"snapshot.yaml": _yaml(recipe_result(override_pairs=None))},
            "snapshot.yaml: kubeflow-trainer ships torch-distributed-tcpxo but records no "
            "tcpxoInterfaces override",
            id="manifest-without-override",
        ),
        pytest.param(
            {"recipe.yaml": _yaml(recipe_result(override_pairs=PAIRS[:7]))},
            "exactly 8 entries",
            id="override-seven",
        ),
        pytest.param(
            {"recipe.yaml": _yaml(recipe_result(configuration=REVERSED))},
            "override disagrees with configuration.gke.tcpxoInterfaces",
            id="configuration-mismatch",
        ),
        pytest.param(
            {
                "recipe.yaml": _yaml(
                    recipe_result() | {"configuration": {"gke": {"tcpxoInterfaces": "eth1=x"}}}
                )
            },
            "configuration.gke.tcpxoInterfaces must be a list",
            id="configuration-not-a-list",
        ),
    ],
)
def test_an_invalid_recipe_carries_the_reason_and_no_mapping(
    data: dict[str, object], fragment: str
) -> None:
    recipe = _read(data)
    assert recipe.mapping is None
    assert recipe.problem is not None
    assert fragment in recipe.problem


def test_an_override_given_as_a_string_does_not_normalize() -> None:
    text = _yaml(
        {
            "kind": "RecipeResult",
            "componentRefs": [
                {
                    "name": "kubeflow-trainer",
                    "manifestFiles": [TCPXO_MANIFEST],
                    "overrides": {"tcpxoInterfaces": "eth1=gpu-nic-0"},
                }
            ],
        }
    )
    problem = _read({"recipe.yaml": text}).problem
    assert problem == (
        "kubeflow-trainer overrides.tcpxoInterfaces must be a list of {interfaceName, network} "
        "entries"
    )


def test_a_41_character_network_name_is_accepted() -> None:
    assert len(NAME_41) == 41
    assert _read(_plain(_replace(2, ("eth3", NAME_41)))).problem is None


def test_deep_yaml_nesting_is_an_invalid_recipe_not_a_crash() -> None:
    problem = _read({"tcpxoInterfaces": "[" * 50_000 + "]" * 50_000}).problem
    assert problem is not None
    assert "is not valid YAML" in problem


VPCS = [(f"eth{i}", f"vpc{i}") for i in range(1, 9)]


def _interfaces(pairs: list[Pair]) -> dict[str, object]:
    return {"interfaces": json.dumps(entries(pairs))}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(_interfaces(VPCS), VPCS, id="google-vpc-names"),
        pytest.param(
            _interfaces([(f"eth{i}", f"a3-gpunet-{i - 1}-subnet") for i in range(1, 5)]),
            [(f"eth{i}", f"a3-gpunet-{i - 1}-subnet") for i in range(1, 5)],
            id="cluster-toolkit-a3-high-four",
        ),
        pytest.param(_interfaces([("eth1", "vpc1")]), [("eth1", "vpc1")], id="one"),
        pytest.param(_interfaces(list(PAIRS)), list(PAIRS), id="aicr-names-too"),
        pytest.param(
            {"interfaces": "- interfaceName: eth1\n  network: vpc1\n"},
            [("eth1", "vpc1")],
            id="yaml",
        ),
        pytest.param(_interfaces(VPCS) | {"format": "yaml"}, VPCS, id="other-keys-ignored"),
    ],
)
def test_the_interfaces_key_delivers_networks_of_any_valid_name(
    data: dict[str, object], expected: list[Pair]
) -> None:
    assert _read(data) == Recipe(
        ref="ns/recipe@7", mapping=tuple(InterfaceRef(n, net) for n, net in expected)
    )


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        pytest.param(_interfaces([]), "interfaces must contain 1 to 8 entries, got 0", id="empty"),
        pytest.param(
            _interfaces([*VPCS, ("eth9", "vpc9")]),
            "interfaces must contain 1 to 8 entries, got 9",
            id="nine",
        ),
        pytest.param(
            _interfaces([("eth2", "vpc2"), ("eth1", "vpc1")]),
            'interfaces entry 0 is named "eth2": the entries must be eth1..eth2 in order',
            id="out-of-order",
        ),
        pytest.param(
            _interfaces([("eth1", "vpc1"), ("eth3", "vpc3")]),
            'interfaces entry 1 is named "eth3": the entries must be eth1..eth2 in order',
            id="gap",
        ),
        pytest.param(
            _interfaces([("eth0", "vpc0")]),
            'interfaces entry 0 is named "eth0": the entries must be eth1..eth1 in order',
            id="eth0",
        ),
        pytest.param(
            _interfaces([("eth1", "vpc1"), ("eth1", "vpc2")]),
            'interfaces entry 1 is named "eth1"',
            id="duplicate-name",
        ),
        pytest.param(
            _interfaces([("eth1", "default")]),
            'eth1: "default" is reserved for eth0',
            id="default",
        ),
        pytest.param(
            _interfaces([("eth1", "VPC1")]), 'eth1: invalid Network name "VPC1"', id="upper"
        ),
        pytest.param(_interfaces([("eth1", NAME_42)]), "use 1-41 lowercase", id="42-chars"),
        pytest.param(
            _interfaces([("eth1", "vpc1"), ("eth2", "vpc1")]),
            "duplicate network vpc1: each interface needs its own Network",
            id="duplicate-network",
        ),
        pytest.param(
            {"interfaces": "a: b"},
            "interfaces must be a list of {interfaceName, network} entries",
            id="not-a-list",
        ),
        pytest.param(
            _interfaces(VPCS) | plain_recipe(),
            "(found: tcpxoInterfaces, interfaces)",
            id="beside-tcpxo-interfaces",
        ),
    ],
)
def test_an_invalid_interfaces_key_is_an_invalid_recipe(
    data: dict[str, object], problem: str
) -> None:
    recipe = _read(data)
    assert recipe.mapping is None
    assert recipe.problem is not None
    assert problem in recipe.problem
