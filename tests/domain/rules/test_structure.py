"""Structural rules of a wired node template (app.domain.rules.structure, docs/rules.md)."""

from __future__ import annotations

import json

import pytest

from app.domain.annotation import InterfaceRef
from app.domain.fields import FieldPath
from app.domain.rules.structure import Structure, structure_of
from app.domain.template import NODE_JOB, PodTemplate, job_template
from app.domain.wiring import AnnotationValue, Wiring, template_wiring
from tests.builders import (
    ANNOTATIONS_PATH,
    DEFAULT_INTERFACE,
    INTERFACES,
    INTERFACES_PATH,
    PAIRS,
    annotation,
    entries,
    runtime,
    wired,
)

DEFAULT_PATH = f"{ANNOTATIONS_PATH}[{DEFAULT_INTERFACE}]"


def _check(annotations: dict[str, object], *, bound: bool = True) -> Structure:
    template = job_template(runtime(annotations=annotations), NODE_JOB)
    assert isinstance(template, PodTemplate)
    return structure_of(template_wiring(template), bound=bound)


def _codes(structure: Structure) -> tuple[str, ...]:
    return tuple(v.code.value for v in structure.violations)


@pytest.mark.parametrize("bound", [True, False])
def test_a_correct_wiring_has_no_violations_and_yields_its_entries(bound: bool) -> None:
    structure = _check(wired(), bound=bound)
    assert structure.violations == ()
    assert structure.entries == tuple(
        InterfaceRef(n, net) for n, net in [("eth0", "default"), *PAIRS]
    )
    assert structure.networks == frozenset(net for _, net in PAIRS)
    assert structure.notes == ()


@pytest.mark.parametrize("bound", [True, False])
def test_the_networks_looked_up_are_the_network_objects_named(bound: bool) -> None:
    # Either name of the pod network is no Network object; a NetworkInterface names none.
    value = json.dumps(
        [
            {"interfaceName": "eth0", "network": "default"},
            {"interfaceName": "eth1", "network": "gpu-nic-0"},
            {"interfaceName": "eth2", "interface": "nic"},
            {"interfaceName": "eth3", "network": "pod-network"},
            {"interfaceName": "eth4", "network": "gpu-nic-1"},
        ]
    )
    structure = _check({INTERFACES: value, DEFAULT_INTERFACE: "eth0"}, bound=bound)
    assert structure.entries is not None
    assert structure.networks == frozenset({"gpu-nic-0", "gpu-nic-1"})
    assert structure.notes == (
        "eth2->interface:nic (entry 2) uses a NetworkInterface; not checked",
    )


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        pytest.param(None, "networking.gke.io/default-interface is missing", id="missing"),
        pytest.param("eth1", 'networking.gke.io/default-interface is "eth1"', id="wrong"),
        pytest.param("", 'is ""', id="empty"),
        pytest.param("eth0\n", 'is "eth0\\n"', id="escaped"),
        pytest.param(0, "is not a string", id="non-string"),
    ],
)
def test_the_default_interface_must_be_eth0(value: object, fragment: str) -> None:
    annotations = wired(default=None)
    if value is not None:
        annotations[DEFAULT_INTERFACE] = value
    structure = _check(annotations)
    assert _codes(structure) == ("DefaultInterfaceInvalid",)
    assert structure.violations[0].field == DEFAULT_PATH
    assert fragment in structure.violations[0].message
    assert 'need it set to "eth0"' in structure.violations[0].message
    assert structure.entries is not None


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        pytest.param("eth0=default", "is not valid JSON", id="not-json"),
        pytest.param("[]", "must be a non-empty JSON list", id="empty-list"),
        pytest.param("null", "must be a non-empty JSON list", id="null"),
        pytest.param(json.dumps({"interfaceName": "eth0"}), "non-empty JSON list", id="object"),
        pytest.param(annotation([("eth1", "")]), "entry 1 has a network", id="empty-network"),
        pytest.param(17, "must be a string holding a JSON list", id="non-string-value"),
    ],
)
def test_a_malformed_annotation_is_reported_once_and_stops_further_checks(
    value: object, fragment: str
) -> None:
    structure = _check({INTERFACES: value, DEFAULT_INTERFACE: "eth0"})
    assert _codes(structure) == ("InterfacesAnnotationMalformed",)
    assert structure.violations[0].field == INTERFACES_PATH
    assert fragment in structure.violations[0].message
    assert structure.entries is None


def test_a_malformed_annotation_is_reported_with_a_wrong_default_interface() -> None:
    structure = _check({INTERFACES: "nope", DEFAULT_INTERFACE: "eth1"})
    assert _codes(structure) == ("DefaultInterfaceInvalid", "InterfacesAnnotationMalformed")


@pytest.mark.parametrize(
    ("first", "shown_pair"),
    [
        pytest.param(("eth1", "default"), "eth1->default", id="wrong-name"),
        pytest.param(("eth0", "gpu-nic-0"), "eth0->gpu-nic-0", id="wrong-network"),
        pytest.param(("eth1", "pod-network"), "eth1->pod-network", id="pod-network-not-eth0"),
        pytest.param(("ETH0", "default"), "ETH0->default", id="case-sensitive"),
    ],
)
def test_the_first_entry_must_be_exactly_eth0_default(
    first: tuple[str, str], shown_pair: str
) -> None:
    value = json.dumps(entries([first, ("eth0", "eth0"), ("eth0", "gpu-nic-0")]))
    structure = _check({INTERFACES: value, DEFAULT_INTERFACE: "eth0"})
    assert _codes(structure) == ("PrimaryInterfaceInvalid",)
    assert structure.violations[0].field == f"{INTERFACES_PATH}[0]"
    assert f"found {shown_pair} first" in structure.violations[0].message
    assert structure.entries is None


@pytest.mark.parametrize("network", ["default", "pod-network"])
def test_eth0_on_either_name_of_the_pod_network_is_the_primary(network: str) -> None:
    # "pod-network" is GKE's older name of the default network (IsDefaultNetwork).
    value = json.dumps(entries([("eth0", network), ("eth1", "gpu-nic-0")]))
    structure = _check({INTERFACES: value, DEFAULT_INTERFACE: "eth0"})
    assert _codes(structure) == ()
    assert structure.entries is not None
    assert [e.pair() for e in structure.entries] == [f"eth0->{network}", "eth1->gpu-nic-0"]


def test_a_network_interface_reference_as_first_entry_is_not_the_primary() -> None:
    value = json.dumps([{"interfaceName": "eth0", "interface": "default"}])
    structure = _check({INTERFACES: value, DEFAULT_INTERFACE: "eth0"})
    assert _codes(structure) == ("PrimaryInterfaceInvalid",)
    assert "eth0->interface:default" in structure.violations[0].message


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        pytest.param("eth1", True, id="eth1"),
        pytest.param("eth10", True, id="eth10"),
        pytest.param("eth01", True, id="eth01"),
        pytest.param("gpu0rdma0", True, id="gke-rdma-name"),
        pytest.param("ens1", True, id="ens1"),
        pytest.param("ETH1", True, id="uppercase"),
        pytest.param("a" * 15, True, id="15-bytes"),
        pytest.param("é" * 7, True, id="14-utf8-bytes"),
        pytest.param("a.b-c_d", True, id="punctuation"),
        pytest.param("a" * 16, False, id="16-bytes"),
        pytest.param("é" * 8, False, id="16-utf8-bytes"),
        pytest.param(".", False, id="dot"),
        pytest.param("..", False, id="dot-dot"),
        pytest.param("eth1\n", False, id="trailing-newline"),
        pytest.param("eth 1", False, id="space"),
        pytest.param("eth\t1", False, id="tab"),
        pytest.param("eth/1", False, id="slash"),
        pytest.param("eth:1", False, id="colon-alias"),
        pytest.param("eth1\x1b[2J", False, id="escape-sequence"),
        pytest.param("\x00eth1", False, id="nul"),
        pytest.param("eth\x1f", False, id="last-c0"),
        pytest.param("eth\x7f", False, id="del"),
        pytest.param("eth\x80", False, id="first-c1"),
        pytest.param("eth\x9b1", False, id="c1-csi"),
        pytest.param("eth\xa01", False, id="no-break-space"),
        pytest.param("eth\xa1", True, id="first-printable-after-c1"),
    ],
)
def test_secondary_interface_names_must_be_valid_linux_names(name: str, valid: bool) -> None:
    structure = _check(wired([(name, "gpu-nic-0")]))
    if valid:
        assert _codes(structure) == ()
        return
    assert _codes(structure) == ("InterfaceNameInvalid",)
    violation = structure.violations[0]
    assert violation.field == f"{INTERFACES_PATH}[1].interfaceName"
    assert "not a valid Linux interface name (1-15 bytes" in violation.message


def test_eth0_as_a_secondary_is_a_duplicate() -> None:
    structure = _check(wired([("eth1", "gpu-nic-0"), ("eth0", "gpu-nic-1")]))
    assert _codes(structure) == ("InterfaceDuplicated",)
    duplicated = structure.violations[0]
    assert duplicated.field == f"{INTERFACES_PATH}[2].interfaceName"
    assert "interface eth0 is mapped twice (entries 0 and 2)" in duplicated.message


def test_a_repeated_secondary_interface_is_a_duplicate_at_its_second_position() -> None:
    structure = _check(wired([("eth1", "gpu-nic-0"), ("eth2", "gpu-nic-1"), ("eth1", "gpu-nic-2")]))
    assert _codes(structure) == ("InterfaceDuplicated",)
    assert structure.violations[0].field == f"{INTERFACES_PATH}[3].interfaceName"
    assert "(entries 1 and 3)" in structure.violations[0].message


@pytest.mark.parametrize(
    "reserved",
    [pytest.param("default", id="default"), pytest.param("pod-network", id="pod-network")],
)
def test_reserved_networks_cannot_back_a_secondary_interface(reserved: str) -> None:
    structure = _check(wired([("eth1", reserved)]))
    assert _codes(structure) == ("NetworkReserved",)
    assert structure.violations[0].field == f"{INTERFACES_PATH}[1].network"
    assert f'eth1->{reserved} uses the reserved network "{reserved}"' in (
        structure.violations[0].message
    )


def test_a_network_on_two_secondary_entries_is_duplicated() -> None:
    structure = _check(wired([("eth1", "gpu-nic-0"), ("eth2", "gpu-nic-1"), ("eth3", "gpu-nic-0")]))
    assert _codes(structure) == ("NetworkDuplicated",)
    assert structure.violations[0].field == f"{INTERFACES_PATH}[3].network"
    assert "network gpu-nic-0 is mapped to both eth1 and eth3" in structure.violations[0].message


def test_network_interface_references_are_not_network_duplicates() -> None:
    value = json.dumps(
        [
            {"interfaceName": "eth0", "network": "default"},
            {"interfaceName": "eth1", "interface": "nic"},
            {"interfaceName": "eth2", "interface": "nic"},
        ]
    )
    structure = _check({INTERFACES: value, DEFAULT_INTERFACE: "eth0"})
    assert structure.violations == ()
    assert structure.entries == (
        InterfaceRef("eth0", network="default"),
        InterfaceRef("eth1", interface="nic"),
        InterfaceRef("eth2", interface="nic"),
    )


def test_every_structural_violation_is_collected_together() -> None:
    pairs = [("eth1", "pod-network"), ("eth:1", "gpu-nic-0"), ("eth1", "pod-network")]
    structure = _check(wired(pairs, default="eth2"))
    assert _codes(structure) == (
        "DefaultInterfaceInvalid",
        "NetworkReserved",
        "InterfaceNameInvalid",
        "NetworkReserved",
        "InterfaceDuplicated",
        "NetworkDuplicated",
    )


def _wiring(interfaces: object, path: str = INTERFACES_PATH) -> Wiring:
    return Wiring(
        interfaces=AnnotationValue(interfaces, FieldPath(path)),
        default_interface=AnnotationValue("eth0", FieldPath(DEFAULT_PATH)),
        annotations_path=FieldPath(ANNOTATIONS_PATH),
    )


@pytest.mark.parametrize(
    "interfaces",
    [
        pytest.param(wired()[INTERFACES], id="correct"),
        pytest.param(
            json.dumps(entries([("eth0", "default"), ("eth1", "a"), ("eth1", "a")])), id="dup"
        ),
        pytest.param("[{", id="not-json"),
        pytest.param(["not", "a", "string"], id="a-list-value"),
        pytest.param(True, id="true"),
        pytest.param(1, id="one"),
        pytest.param(
            json.dumps(
                entries([("eth0", "default"), *((f"eth{i}", "n" * 600) for i in range(1, 9))])
            ),
            id="longer-than-memoised",
        ),
    ],
)
def test_a_wiring_judged_again_gets_the_same_structure_wherever_it_sits(interfaces: object) -> None:
    first = structure_of(_wiring(interfaces), bound=True)
    assert first == structure_of(_wiring(interfaces), bound=True)
    # The same value at another place: its violations name that place, not the first one's.
    elsewhere = structure_of(_wiring(interfaces, path="spec.runtimeRef"), bound=True)
    assert [v.code for v in elsewhere.violations] == [v.code for v in first.violations]
    assert elsewhere.entries == first.entries
    assert all(not v.field.startswith(INTERFACES_PATH) for v in elsewhere.violations)


def test_a_bound_and_an_unbound_template_with_one_wiring_are_judged_apart() -> None:
    # The memo keys on the binding too: GKE's rules never answer for AICR's, nor the reverse.
    wiring = _wiring(json.dumps(entries([("eth1", "gpu-nic-0"), ("eth0", "default")])))
    assert [v.code.value for v in structure_of(wiring, bound=True).violations] == [
        "PrimaryInterfaceInvalid"
    ]
    assert structure_of(wiring, bound=False).violations == ()


def _unbound(pairs: list[tuple[str, str]], default: object = None) -> Structure:
    annotations: dict[str, object] = {INTERFACES: json.dumps(entries(pairs))}
    if default is not None:
        annotations[DEFAULT_INTERFACE] = default
    return _check(annotations, bound=False)


GATEWAY = [("eth0", "default"), ("eth1", "secondary-network")]


@pytest.mark.parametrize(
    ("pairs", "default", "codes"),
    [
        pytest.param(GATEWAY, None, (), id="no-default-key-is-gke-default-eth0"),
        pytest.param(GATEWAY, "eth1", (), id="default-route-on-the-second-gvnic"),
        pytest.param(GATEWAY, "eth0", (), id="eth0-named"),
        pytest.param(GATEWAY, "eth2", ("DefaultInterfaceInvalid",), id="names-no-listed"),
        pytest.param(GATEWAY, "", ("DefaultInterfaceInvalid",), id="empty"),
        pytest.param(GATEWAY, 1, ("DefaultInterfaceInvalid",), id="not-a-string"),
        pytest.param([("eth1", "gpu-nic-0"), ("eth0", "default")], "eth0", (), id="eth0-not-first"),
        pytest.param([("eth1", "gpu-nic-0")], None, (), id="no-eth0-entry"),
        pytest.param(
            [("eth0", "gpu-nic-0"), ("eth1", "default")], None, (), id="eth0-on-a-network"
        ),
        pytest.param(
            [("eth0", "default"), ("eth1", "pod-network")], None, (), id="pod-network-twice"
        ),
        pytest.param(
            [("eth0", "default"), ("eth:1", "a")], None, ("InterfaceNameInvalid",), id="bad-name"
        ),
        pytest.param(
            [("eth 0", "default"), ("eth1", "a")], None, ("InterfaceNameInvalid",), id="bad-first"
        ),
        pytest.param(
            [("eth0", "default"), ("eth1", "a"), ("eth1", "b")],
            None,
            ("InterfaceDuplicated",),
            id="interface-twice",
        ),
        pytest.param(
            [("eth1", "a"), ("eth0", "default"), ("eth2", "a")],
            None,
            ("NetworkDuplicated",),
            id="network-twice",
        ),
    ],
)
def test_an_unbound_template_is_held_to_what_gke_enforces(
    pairs: list[tuple[str, str]], default: object, codes: tuple[str, ...]
) -> None:
    structure = _unbound(pairs, default)
    assert _codes(structure) == codes
    assert structure.entries == tuple(InterfaceRef(n, net) for n, net in pairs)


def test_an_unbound_default_interface_names_an_interface_of_the_list() -> None:
    structure = _unbound(GATEWAY, "eth2")
    violation = structure.violations[0]
    assert violation.field == DEFAULT_PATH
    assert violation.message == (
        'networking.gke.io/default-interface is "eth2", which names no interface of '
        "networking.gke.io/interfaces (it lists eth0, eth1); the pod's default route needs "
        "one of them"
    )


def test_an_unbound_default_interface_lists_a_long_list_in_part() -> None:
    pairs = [("eth0", "default"), *((f"eth{i}", f"n{i}") for i in range(1, 20))]
    message = _unbound(pairs, "eth99").violations[0].message
    assert "(it lists eth0, eth1," in message
    assert "eth11 and 8 more)" in message


def test_an_unbound_default_interface_that_is_not_a_string_says_so() -> None:
    violation = _unbound(GATEWAY, ["eth1"]).violations[0]
    assert violation.code.value == "DefaultInterfaceInvalid"
    assert violation.message.startswith("networking.gke.io/default-interface is not a string")


@pytest.mark.parametrize(
    ("default", "codes"),
    [
        pytest.param("eth9", ("InterfacesAnnotationMalformed",), id="string-not-judged"),
        pytest.param(
            7, ("DefaultInterfaceInvalid", "InterfacesAnnotationMalformed"), id="non-string"
        ),
    ],
)
def test_a_malformed_unbound_list_leaves_nothing_to_name(
    default: object, codes: tuple[str, ...]
) -> None:
    structure = _check({INTERFACES: "[{", DEFAULT_INTERFACE: default}, bound=False)
    assert _codes(structure) == codes
    assert structure.entries is None


def test_an_unbound_duplicate_network_points_at_its_second_entry() -> None:
    structure = _unbound([("eth1", "a"), ("eth0", "default"), ("eth2", "a")])
    violation = structure.violations[0]
    assert violation.field == f"{INTERFACES_PATH}[2].network"
    assert "network a is mapped to both eth1 and eth2" in violation.message


def test_an_unbound_bad_first_name_points_at_entry_zero() -> None:
    violation = _unbound([("eth 0", "default")]).violations[0]
    assert violation.field == f"{INTERFACES_PATH}[0].interfaceName"
