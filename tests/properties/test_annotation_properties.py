"""``parse_interfaces``: any text yields InterfaceRefs or AnnotationSyntaxError, nothing else.

An independent model of docs/rules.md ``InterfacesAnnotationMalformed`` rule says which
decoded values are accepted; the parser must agree with it on every input.
"""

from __future__ import annotations

import json
import re

from hypothesis import given, settings, strategies as st

from app.domain.annotation import AnnotationSyntaxError, InterfaceRef, parse_interfaces
from app.domain.rules.structure import valid_interface_name
from tests.builders import PAIRS, annotation
from tests.properties.strategies import (
    any_text,
    encoded_entries,
    entry_of,
    finite_json_values,
    interface_refs,
    is_finite,
    json_values,
    mutated,
)
from tests.support.examples import examples

CORE = settings(max_examples=examples(200))
VALID = json.loads(annotation(PAIRS))


def _reject_constant(name: str) -> object:
    raise ValueError(name)


def expected_refs(value: object) -> tuple[InterfaceRef, ...] | None:
    """The model: what a decoded annotation value parses to, or None when it is malformed."""
    if not is_finite(value) or not isinstance(value, list) or not value:
        return None
    found = []
    for item in value:
        if not isinstance(item, dict):
            return None
        name, network, interface = (item.get(k) for k in ("interfaceName", "network", "interface"))
        if not isinstance(name, str) or not name:
            return None
        if any(v is not None and (not isinstance(v, str) or not v) for v in (network, interface)):
            return None
        if (network is None) == (interface is None):
            return None
        found.append(go_read(InterfaceRef(name, network, interface)))
    return tuple(found)


def go_read(ref: InterfaceRef) -> InterfaceRef:
    """Go decodes an escaped half of a surrogate pair as U+FFFD; Python keeps the half."""

    def go(value: str | None) -> str | None:
        return None if value is None else re.sub("[\ud800-\udfff]", "\ufffd", value)

    return InterfaceRef(go(ref.interface_name) or "", go(ref.network), go(ref.interface))


def expected_from_text(raw: str) -> tuple[InterfaceRef, ...] | None:
    try:
        decoded = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    return expected_refs(decoded)


def _check_reason(error: AnnotationSyntaxError) -> None:
    message = str(error)
    assert message
    assert "\n" not in message


def parsed(raw: str) -> tuple[InterfaceRef, ...] | None:
    """The parser's answer; any exception other than AnnotationSyntaxError fails the test."""
    try:
        refs = parse_interfaces(raw)
    except AnnotationSyntaxError as error:
        _check_reason(error)
        return None
    assert isinstance(refs, tuple)
    assert refs
    for ref in refs:
        assert isinstance(ref, InterfaceRef)
        assert isinstance(ref.interface_name, str)
        assert ref.interface_name
        assert (ref.network is None) != (ref.interface is None)
        assert isinstance(ref.pair(), str)
    return refs


@CORE
@given(st.text() | any_text)
def test_any_text_parses_or_raises_annotation_syntax_error(raw: str) -> None:
    assert parsed(raw) == expected_from_text(raw)


@CORE
@given(json_values)
def test_any_json_value_parses_as_the_model_says(value: object) -> None:
    raw = json.dumps(value)
    assert parsed(raw) == expected_refs(value)


FIELD_VALUES = st.sampled_from(["eth0", "eth1", "default", "gpu-nic-0", ""]) | finite_json_values
ENTRY_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "interfaceName": FIELD_VALUES,
        "network": FIELD_VALUES,
        "interface": FIELD_VALUES,
        "mtu": json_values,
    },
)


@CORE
@given(st.lists(ENTRY_LIKE | finite_json_values, max_size=6))
def test_entry_like_lists_parse_as_the_model_says(value: list[object]) -> None:
    raw = json.dumps(value)
    assert parsed(raw) == expected_refs(value)


@CORE
@given(mutated(VALID))
def test_near_valid_lists_parse_as_the_model_says(value: object) -> None:
    raw = json.dumps(value)
    assert parsed(raw) == expected_refs(value)


@CORE
@given(mutated(annotation(PAIRS)))
def test_near_valid_annotation_text_parses_as_the_model_says(value: object) -> None:
    raw = value if isinstance(value, str) else json.dumps(value)
    assert parsed(raw) == expected_from_text(raw)


@settings(max_examples=examples(100))
@given(
    st.lists(interface_refs(), min_size=1, max_size=6).flatmap(
        lambda refs: st.tuples(st.just(refs), encoded_entries(refs))
    )
)
def test_valid_lists_round_trip(case: tuple[list[InterfaceRef], str]) -> None:
    refs, raw = case
    assert parse_interfaces(raw) == tuple(go_read(ref) for ref in refs)


@settings(max_examples=examples(100))
@given(st.lists(interface_refs(), min_size=1, max_size=6), st.data())
def test_a_non_finite_number_anywhere_is_malformed(
    refs: list[InterfaceRef], data: st.DataObject
) -> None:
    entries = [entry_of(ref) for ref in refs]
    position = data.draw(st.integers(0, len(entries) - 1))
    entries[position][data.draw(st.sampled_from(["mtu", "network", "interfaceName"]))] = data.draw(
        st.sampled_from([float("nan"), float("inf"), float("-inf")])
    )
    assert parsed(json.dumps(entries)) is None


def _linux_accepts(name: str) -> bool:
    """The rule as docs/rules.md words it, with no fast path: 1-15 bytes of UTF-8 (lone
    surrogates counted as three), no whitespace, control character (C0, DEL, C1), "/" or ":",
    not "." or ".."."""
    size = len(name.encode("utf-8", "surrogatepass"))
    forbidden = any(
        c in "/:" or c.isspace() or ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in name
    )
    return 0 < size <= 15 and name not in (".", "..") and not forbidden


@CORE
@given(
    st.one_of(
        st.text(max_size=20),
        st.text(alphabet="abcXYZ0189", max_size=20),
        st.text(alphabet=st.characters(max_codepoint=0xA1), max_size=20),
    )
)
def test_interface_name_validity_matches_the_rule(name: str) -> None:
    assert valid_interface_name(name) == _linux_accepts(name)
