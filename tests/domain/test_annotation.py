"""The strict parser of the ``networking.gke.io/interfaces`` value (app.domain.annotation)."""

from __future__ import annotations

import json

import pytest

from app.domain.annotation import (
    MAX_CHARS,
    MAX_ENTRIES,
    MOST_INTERFACES,
    AnnotationSyntaxError,
    InterfaceRef,
    go_fold,
    interface_ref,
    parse_interfaces,
)
from app.domain.profiles import A4X_GB200_RDMA
from app.domain.recipe import normalize_mapping
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
        pytest.param(
            _with({"interfaceName": "eth1", "network": "n", "networks": "x", "netw\u00f6rk": "y"}),
            (InterfaceRef("eth0", "default"), InterfaceRef("eth1", "n")),
            id="keys-folding-to-no-field-ignored",
        ),
        pytest.param(
            _with({"interfaceName": "eth1", "network": "n", "note": {"a": 1, "b": "c:d"}}),
            (InterfaceRef("eth0", "default"), InterfaceRef("eth1", "n")),
            id="nested-object-and-colon-in-a-string",
        ),
        pytest.param(
            '[{"interfaceName":"eth0","network":"default"},'
            '{"interfaceName":"eth1","network":"n","x":{"a":1,"a":2}}]',
            (InterfaceRef("eth0", "default"), InterfaceRef("eth1", "n")),
            id="repeat-inside-an-ignored-value",
        ),
        pytest.param(
            '[{"interfaceName":"eth0","network":"default"},{"interfaceName":"eth1","netw\\u006frk":"n"}]',
            (InterfaceRef("eth0", "default"), InterfaceRef("eth1", "n")),
            id="escaped-exact-key",
        ),
        pytest.param(
            '[{"interfaceName":"eth0","network":"default"},'
            '{"interfaceName":"eth\\ud800","network":"n\\udc00"},'
            '{"interfaceName":"e\\ud83d\\ude00","interface":"\\uDFFF"}]',
            (
                InterfaceRef("eth0", "default"),
                InterfaceRef("eth\ufffd", "n\ufffd"),
                InterfaceRef("e\U0001f600", interface="\ufffd"),
            ),
            id="half-a-surrogate-pair-reads-as-go-reads-it",
        ),
    ],
)
def test_a_well_formed_value_decodes_to_entries_in_order(
    raw: str, expected: tuple[InterfaceRef, ...]
) -> None:
    assert parse_interfaces(raw) == expected


def _shadowed(*pairs: str) -> str:
    """A value whose entry 1 holds the given ``"key":"value"`` pairs, written out as text
    (repeated keys cannot be written with a dict)."""
    return '[{"interfaceName":"eth0","network":"default"},{' + ",".join(pairs) + "}]"


_NAMED = '"interfaceName":"eth4"'
_GO_READS_OTHERWISE = [
    (
        "shadow-key-beside",
        _shadowed(_NAMED, '"network":"gpu-nic-3"', '"Network":"no-such-net"'),
        'entry 1 (eth4) has the key "Network", which GKE reads as "network" (it matches keys '
        'case-insensitively); spell it "network" exactly',
    ),
    (
        "shadow-key-before",
        _shadowed(_NAMED, '"NETWORK":"no-such-net"', '"network":"gpu-nic-3"'),
        'entry 1 (eth4) has the key "NETWORK", which GKE reads as "network"',
    ),
    ("instead", _shadowed(_NAMED, '"Network":"x"'), 'the key "Network", which GKE reads as'),
    (
        "kelvin-sign",
        _shadowed(_NAMED, '"networ\u212a":"no-such-net"'),
        'entry 1 (eth4) has the key "networ\\u212a", which GKE reads as "network"',
    ),
    (
        "dotless-i",
        _shadowed('"\u0131nterfaceName":"eth4"', '"network":"n"'),
        'entry 1 has the key "\\u0131nterfaceName", which GKE reads as "interfaceName"',
    ),
    (
        "dotted-capital-i",
        _shadowed(_NAMED, '"\u0130nterface":"x"', '"network":"n"'),
        'the key "\\u0130nterface", which GKE reads as "interface"',
    ),
    (
        "interface-name-upper-case",
        _shadowed('"InterfaceName":"eth4"', '"network":"n"'),
        'entry 1 has the key "InterfaceName", which GKE reads as "interfaceName"',
    ),
    (
        "field-twice",
        _shadowed(_NAMED, '"network":"gpu-nic-3"', '"network":"no-such-net"'),
        'entry 1 (eth4) gives "network" twice (GKE keeps the last); give each key once',
    ),
    (
        "name-twice",
        _shadowed(_NAMED, '"interfaceName":"eth5"', '"network":"n"'),
        'entry 1 (eth5) gives "interfaceName" twice',
    ),
    (
        "null-twice",
        _shadowed(_NAMED, '"network":"n"', '"interface":null', '"interface":null'),
        'gives "interface" twice',
    ),
    (
        "shadow-key-in-an-otherwise-malformed-entry",
        _shadowed('"Network":"x"'),
        'entry 1 has the key "Network", which GKE reads as "network"',
    ),
]


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
        pytest.param("[" * 16_000 + "]" * 16_000, "nested too deeply", id="deep-nesting"),
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
        *[
            pytest.param(raw, reason, id=f"go-reads-it-otherwise-{name}")
            for name, raw, reason in _GO_READS_OTHERWISE
        ],
    ],
)
def test_a_malformed_value_is_rejected_with_the_reason(raw: str, reason: str) -> None:
    with pytest.raises(AnnotationSyntaxError) as raised:
        parse_interfaces(raw)
    assert reason in str(raised.value)


# The longest list a machine can attach, as long as its names can be: 18 interfaces (10 vNICs,
# 8 RDMA NICs), each Network named with 253 characters, indented as a person might write it.
_LONGEST_NAME = "n" * 253
_LONGEST_ATTACHABLE = json.dumps(
    [{"interfaceName": f"eth{n}", "network": f"{_LONGEST_NAME[:-3]}{n:03}"} for n in range(18)],
    indent=8,
)


def test_the_longest_list_a_machine_can_attach_is_read_in_full() -> None:
    assert MOST_INTERFACES == 18
    assert len(_LONGEST_ATTACHABLE) * 4 < MAX_CHARS
    entries = parse_interfaces(_LONGEST_ATTACHABLE)
    assert [e.interface_name for e in entries] == [f"eth{n}" for n in range(18)]
    entries = parse_interfaces(
        _with(*({"interfaceName": f"eth{n}", "network": "x"} for n in range(1, MAX_ENTRIES)))
    )
    assert len(entries) == MAX_ENTRIES


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        pytest.param(
            _with(*({"interfaceName": f"eth{n}", "network": "x" * 40} for n in range(1, 700))),
            f"characters long; no machine GKE runs attaches more than 18 interfaces, so no list "
            f"that long is one GKE can attach (nicguard reads at most {MAX_CHARS})",
            id="characters",
        ),
        pytest.param(
            _with(*({"interfaceName": f"e{n}", "network": "x"} for n in range(1, MAX_ENTRIES + 1))),
            f"holds {MAX_ENTRIES + 1} JSON objects; no machine GKE runs attaches more than 18 "
            f"interfaces, so no list that long is one GKE can attach (nicguard reads at most "
            f"{MAX_ENTRIES} entries)",
            id="entries",
        ),
        pytest.param(
            "[" + ",".join(["{}"] * 10_000) + "]",
            "holds 10000 JSON objects",  # parsed, entry 0 would be what it reports
            id="entries-of-nothing",
        ),
    ],
)
def test_a_list_longer_than_any_machine_attaches_is_refused_from_its_length(
    raw: str, reason: str
) -> None:
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


@pytest.mark.parametrize(
    ("key", "folded"),
    [
        pytest.param("network", "NETWORK", id="ascii"),
        pytest.param("Net-Work_1", "NET-WORK_1", id="ascii-punctuation-kept"),
        pytest.param("\u212a", "K", id="kelvin-sign"),
        pytest.param("\u017f", "S", id="long-s"),
        pytest.param("\u0131", "I", id="dotless-i"),
        pytest.param("\u0130", "I", id="dotted-capital-i"),
        pytest.param("netw\u00f6rk", "NETW\u00f6RK", id="other-runes-kept"),
        pytest.param("\u00df", "\u00df", id="sharp-s-is-not-ss"),
    ],
)
def test_keys_fold_as_go_encoding_json_folds_them(key: str, folded: str) -> None:
    assert go_fold(key) == folded


def test_equal_entries_read_anywhere_are_one_object() -> None:
    # The annotation's entries, a recipe's mapping and a profile's are compared on every review:
    # equal entries being one object, two lists compare item by item by identity.
    parsed = parse_interfaces(_with({"interfaceName": "eth2", "network": "rdma-0"}))
    recorded = normalize_mapping(
        [{"interfaceName": "eth2", "network": "rdma-0"}], where="the recipe's mapping"
    )
    assert A4X_GB200_RDMA.mapping is not None
    assert parsed[1] is recorded[0] is A4X_GB200_RDMA.mapping[1]
    assert parsed[1] == InterfaceRef("eth2", "rdma-0")
    assert (
        interface_ref("eth1", None, "nic-1")
        is parse_interfaces(_with({"interfaceName": "eth1", "interface": "nic-1"}))[1]
    )
