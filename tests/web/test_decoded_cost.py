"""``DecodedCost``: a body is charged DECODED_PER_TOKEN per value or container it begins outside
strings, however its chunks cut it, and that is at least what orjson holds once it is decoded."""

from __future__ import annotations

import gc
import itertools
import json
import tracemalloc
from collections.abc import Iterable
from typing import Final

import orjson
import pytest
from hypothesis import given, settings, strategies as st

from app.web.decoded_cost import DECODED_PER_TOKEN, DecodedCost
from tests.support.examples import examples


def charged(chunks: Iterable[bytes]) -> int:
    cost = DecodedCost()
    return sum(cost.of(chunk) for chunk in chunks)


def tokens(value: object) -> int:
    """The `,` `[` `{` JSON text of ``value`` holds outside its strings: one per container, and
    one per item of a container after its first."""
    if isinstance(value, list):
        return 1 + max(len(value) - 1, 0) + sum(map(tokens, value))
    if isinstance(value, dict):
        return 1 + max(len(value) - 1, 0) + sum(map(tokens, value.values()))
    return 0


def cuts(body: bytes) -> Iterable[tuple[str, list[bytes]]]:
    """``body`` whole, cut in two at every byte, and byte by byte."""
    yield "whole", [body]
    for at in range(1, len(body)):
        yield f"cut at {at}", [body[:at], body[at:]]
    yield "bytewise", [body[i : i + 1] for i in range(len(body))]


CASES: Final = [
    ("commas in a string", rb'{"a":",,,[[[{{{"}', 1),
    ("structure only", b"[{},{},[],[{}]]", 9),
    ("keys holding structure", rb'{"[,{":{"}":[]},"x":"]"}', 4),
    ("an escaped quote", rb'["\",[{", ","]', 2),
    ("an escaped backslash ends no string", rb'["\\", ",", "\\\\"]', 3),
    ("an escaped backslash then an escaped quote", rb'["\\\",[", "a"]', 2),
    ("escapes of every kind", rb'["\/\b\f\n\r\t,\u005c", "{"]', 2),
    ("unicode escapes of a quote and a backslash", rb'["\u0022,[{\u005C", [1,2]]', 4),
    ("a surrogate pair", rb'{"a":"\ud83d\ude00,[","b":[{}]}', 4),
    ("UTF-8 text", '{"a":"ü,[{😀","b":["é"]}'.encode(), 3),
    ("whitespace", b' [ { "a" : [ 1 , 2 ] } , { } ] ', 6),
    ("nested", rb'{"a":[{"b":[1,2,{"c":"x,y"}]}],"d":"[{,"}', 8),
    ("a UTF-8 byte order mark", b'\xef\xbb\xbf["[,{",[]]', 3),
]


@pytest.mark.parametrize(("body", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_body_is_charged_the_structure_outside_its_strings_however_it_is_cut(
    body: bytes, expected: int
) -> None:
    assert tokens(json.loads(body)) == expected  # the cases are JSON, and their tokens right
    for how, chunks in cuts(body):
        assert charged(chunks) == expected * DECODED_PER_TOKEN, how


@pytest.mark.parametrize("run", [1, 2, 3, 4, 5], ids=lambda n: f"{n} backslashes")
def test_a_run_of_backslashes_cut_anywhere_pairs_as_json_pairs_it(run: int) -> None:
    """Odd, the run escapes the quote after it and `,[{` goes on in the string; even, the
    string ends there, and `", "` is between two strings."""
    backslashes = b"\\" * run
    body = b'["' + backslashes + (b'",[{"]' if run % 2 else b'", ",[{"]')
    expected = 1 if run % 2 else 2
    assert tokens(json.loads(body)) == expected
    for how, chunks in cuts(body):
        assert charged(chunks) == expected * DECODED_PER_TOKEN, how


def test_a_chunk_without_bytes_changes_nothing_even_inside_an_escape() -> None:
    cost = DecodedCost()
    assert cost.of(b'["\\') == DECODED_PER_TOKEN
    assert cost.of(b"") == 0
    assert cost.of(b'"') == 0  # the escaped quote: still in the string
    assert cost.of(b',[{"') == 0
    assert cost.of(b",[{}]]") == 3 * DECODED_PER_TOKEN


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-16", "utf-32", "utf-32-le"])
def test_a_utf16_or_utf32_body_is_charged_every_structure_byte(encoding: str) -> None:
    """json.loads reads these (orjson does not); a character of a string may hold a `"` byte
    (U+2200 is 22 00 or 00 22), so the bytes cannot tell what is in a string: all count."""
    text = '["\u2200", [{}, {}], ",[{\u222c"]'
    body = text.encode(encoding)
    assert json.loads(body) == ["\u2200", [{}, {}], ",[{\u222c"]
    every = sum(map(body.count, (b",", b"[", b"{")))
    assert every > tokens(json.loads(body))
    for how, chunks in cuts(body):
        assert charged(chunks) == every * DECODED_PER_TOKEN, how


STRUCTURE_TEXT: Final = st.text(
    st.sampled_from([",", "[", "{", "]", "}", '"', "\\", "a", "\u00e9", "\u2200", "\U0001f600"])
    | st.characters(codec="utf-8"),
    max_size=12,
)
JSON_VALUES: Final = st.recursive(
    st.none() | st.booleans() | st.integers() | STRUCTURE_TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(STRUCTURE_TEXT, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=examples(500), deadline=None)
@given(
    value=JSON_VALUES,
    ascii_only=st.booleans(),
    at=st.lists(st.integers(min_value=0, max_value=1000), max_size=6),
)
def test_any_json_cut_anywhere_is_charged_its_tokens(
    value: object, ascii_only: bool, at: list[int]
) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode()
    bounds = sorted({0, len(body), *(a % (len(body) + 1) for a in at)})
    chunks = [body[start:end] for start, end in itertools.pairwise(bounds)]
    assert charged(chunks) == tokens(value) * DECODED_PER_TOKEN


def read_bytewise(body: bytes) -> int:
    """The `,` `[` `{` outside strings, a byte at a time: what ``DecodedCost`` does in C. A
    backslash escapes a quote or a backslash after it; outside a string that is no JSON, which
    no decoder reads past, but it is read the same however the body is cut."""
    count, in_string, escaped = 0, False, False
    for byte in body:
        if escaped and byte in b'\\"':
            escaped = False
            continue
        escaped = byte == ord("\\")
        if byte == ord('"'):
            in_string = not in_string
        elif not in_string and byte in b",[{":
            count += 1
    return count


@settings(max_examples=examples(1000), deadline=None)
@given(
    body=st.lists(st.sampled_from([b",", b"[", b"{", b'"', b"\\", b"x", b"\xc3\xa9"])).map(
        b"".join
    ),
    at=st.lists(st.integers(min_value=0, max_value=1000), max_size=6),
)
def test_any_bytes_cut_anywhere_are_charged_as_read_byte_by_byte(
    body: bytes, at: list[int]
) -> None:
    """JSON or not (a decoder stops at the first error: what it holds is a prefix's)."""
    bounds = sorted({0, len(body), *(a % (len(body) + 1) for a in at)})
    chunks = [body[start:end] for start, end in itertools.pairwise(bounds)]
    assert charged(chunks) == read_bytewise(body) * DECODED_PER_TOKEN


def _dense(unit: bytes, count: int) -> bytes:
    return b"[" + b",".join([unit] * count) + b"]"


COUNT: Final = 20_000
# DECODED_PER_TOKEN is what one more item costs; a container of one holds a little more (a
# dict of one key: 184 bytes on 3.11): what one may hold beyond its charge, once per body here.
ONE_CONTAINER: Final = 256
DENSE: Final = {
    "[{},{},...]": _dense(b"{}", COUNT),
    "[[],[],...]": _dense(b"[]", COUNT),
    "[[1],[1],...]": _dense(b"[1]", COUNT),
    '[{"a":0},...]': _dense(b'{"a":0}', COUNT),
    '[{"a":{}},...]': _dense(b'{"a":{}}', COUNT),
    "[1000,...]": _dense(b"1000", COUNT),
    "[1.5,...]": _dense(b"1.5", COUNT),
    '["a",...]': _dense(b'"a"', COUNT),
    "distinct values": b"[" + b",".join(b'"%06d"' % i for i in range(COUNT)) + b"]",
    "distinct keys": b"{" + b",".join(b'"k%06d":0' % i for i in range(COUNT)) + b"}",
    "distinct 80-byte keys": b"{" + b",".join(b'"%080d":0' % i for i in range(COUNT)) + b"}",
    "a string of commas": b'{"a":"' + b",[{" * COUNT + b'"}',
    "strings of commas": _dense(b'",,,,,,,,"', COUNT),
}


@pytest.mark.parametrize("body", DENSE.values(), ids=DENSE.keys())
def test_what_a_body_is_charged_covers_what_orjson_holds_of_it(body: bytes) -> None:
    """The bound the budget relies on: bytes plus charge, at least the Python objects orjson
    makes (text of characters beyond Latin-1, wider once decoded, is the one request being
    judged's: docs/operations.md, "Memory")."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        decoded = orjson.loads(body)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert decoded
    assert held <= len(body) + charged([body]) + ONE_CONTAINER
