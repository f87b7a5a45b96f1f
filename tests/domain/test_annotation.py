"""The strict parser of the ``networking.gke.io/interfaces`` value (app.domain.annotation)."""

from __future__ import annotations

import json

import pytest

from app.domain.annotation import AnnotationSyntaxError, InterfaceRef, parse_interfaces
from tests.builders import annotation

PRIMARY = {"interfaceName": "eth0", "network": "default"}


def _with(*secondaries: object) -> str:
    return json.dumps([PRIMARY, *secondaries])


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(annotation([]), (InterfaceRef("eth0", "default"),), id="primary-only"),
        pytest.param(
            annotation([("eth1", "gpu-nic-0")]),
            (InterfaceRef("eth0", "default"), InterfaceRef("eth1", "gpu-nic-0")),
            id="network-entry",
        ),
        pytest.param(
            _with({"interfaceName": "eth1", "interface": "nic-1"}),
            (InterfaceRef("eth0", "default"), InterfaceRef("eth1", interface="nic-1")),
            id="network-interface-entry",
        ),
        pytest.param(
            _with({"interfaceName": "eth1", "network": None, "interface": "nic-1"}),
            (InterfaceRef("eth0", "default"), InterfaceRef("eth1", interface="nic-1")),
            id="null-network-counts-as-absent",
        ),
        pytest.param(
            f"\n  {_with({'interfaceName': 'eth1', 'network': 'n', 'extra': 1})}\n",
            (InterfaceRef("eth0", "default"), InterfaceRef("eth1", "n")),
            id="whitespace-and-unknown-keys-ignored",
        ),
    ],
)
def test_a_well_formed_value_decodes_to_entries_in_order(
    raw: str, expected: tuple[InterfaceRef, ...]
) -> None:
    assert parse_interfaces(raw) == expected


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        pytest.param("eth0=default", "is not valid JSON: Expecting value", id="not-json"),
        pytest.param("[", "is not valid JSON", id="truncated-json"),
        pytest.param('{"interfaceName": "eth0"}', "non-empty JSON list", id="object"),
        pytest.param('"eth0"', "non-empty JSON list", id="string"),
        pytest.param("42", "non-empty JSON list", id="number"),
        pytest.param("[]", "non-empty JSON list", id="empty-list"),
        pytest.param("null", "non-empty JSON list", id="null"),
        pytest.param("[NaN]", "NaN is not a JSON value", id="nan"),
        pytest.param('[{"x": Infinity}]', "Infinity is not a JSON value", id="infinity"),
        pytest.param("[" * 100_000 + "]" * 100_000, "nested too deeply", id="deep-nesting"),
        pytest.param("[" + "9" * 5000 + "]", "invalid number", id="huge-integer"),
        pytest.param("[null]", "entry 0 is not a JSON object", id="null-entry"),
        pytest.param(_with("eth1"), "entry 1 is not a JSON object", id="string-entry"),
        pytest.param(_with([1]), "entry 1 is not a JSON object", id="list-entry"),
        pytest.param(
            _with({"network": "gpu-nic-0"}),
            "entry 1 has no non-empty string interfaceName",
            id="missing-interface-name",
        ),
        pytest.param(
            _with({"interfaceName": "", "network": "gpu-nic-0"}),
            "entry 1 has no non-empty string interfaceName",
            id="empty-interface-name",
        ),
        pytest.param(
            _with({"interfaceName": 1, "network": "gpu-nic-0"}),
            "entry 1 has no non-empty string interfaceName",
            id="numeric-interface-name",
        ),
        pytest.param(
            _with({"interfaceName": "eth1", "network": 10**400}),
            "entry 1 has a network that is not a non-empty string",
            id="huge-number-network",
        ),
        pytest.param(
            _with({"interfaceName": "eth1", "network": ""}),
            "entry 1 has a network that is not a non-empty string",
            id="empty-network",
        ),
        pytest.param(
            _with({"interfaceName": "eth1", "interface": ["x"]}),
            "entry 1 has a interface that is not a non-empty string",
            id="list-interface",
        ),
        pytest.param(
            _with({"interfaceName": "eth1", "network": "gpu-nic-0", "interface": "nic"}),
            "entry 1 (eth1) has both network and interface; exactly one is required",
            id="both",
        ),
        pytest.param(
            _with({"interfaceName": "eth1"}),
            "entry 1 (eth1) has neither network nor interface; exactly one is required",
            id="neither",
        ),
        pytest.param(
            _with({"interfaceName": "eth1\u202e"}),
            "entry 1 (eth1\\u202e) has neither",
            id="name-escaped-in-reason",
        ),
    ],
)
def test_a_malformed_value_is_rejected_with_the_reason(raw: str, reason: str) -> None:
    with pytest.raises(AnnotationSyntaxError) as raised:
        parse_interfaces(raw)
    assert reason in str(raised.value)


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        pytest.param(InterfaceRef("eth1", "gpu-nic-0"), "eth1->gpu-nic-0", id="network"),
        pytest.param(InterfaceRef("eth2", interface="nic-a"), "eth2->interface:nic-a", id="iface"),
        pytest.param(InterfaceRef("eth\n", "a\tb"), "eth\\n->a\\tb", id="escaped"),
    ],
)
def test_an_entry_renders_as_an_interface_arrow_target_pair(
    ref: InterfaceRef, expected: str
) -> None:
    assert ref.pair() == expected
