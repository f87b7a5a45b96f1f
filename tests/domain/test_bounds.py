"""Bounding and escaping what nicguard writes of an object (app.domain.bounds)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, strategies as st

from app.domain.bounds import codes_once, cut, escaped, printable_ascii, shown_field, size
from app.domain.verdict import Code, Violation


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("gpu-nic-0", "gpu-nic-0", id="printable-unchanged"),
        pytest.param("a\nb\x1b[0m", "a\\nb\\x1b[0m", id="control-characters"),
        pytest.param("t\ud800x", "t\\ud800x", id="lone-surrogate"),
        pytest.param("c\u0085d", "c\\x85d", id="c1-control"),
    ],
)
def test_escaped_leaves_no_raw_control_character(text: str, expected: str) -> None:
    assert escaped(text) == expected


def test_cut_counts_utf8_bytes_and_marks_the_cut() -> None:
    assert cut("abc", 3) == "abc"
    assert cut("☃" * 10, 10) == "☃☃…"
    assert size(cut("x" * 5000, 256)) <= 256
    assert cut("abcdef", 2) == "…"


def test_shown_field_escapes_then_cuts() -> None:
    assert shown_field("\n" * 100, 10) == "\\n\\n\\n\\…"


@given(text=st.text(), max_bytes=st.integers(min_value=0, max_value=80))
@example(text="gpu-nic-0", max_bytes=9)
@example(text="gpu-nic-0", max_bytes=8)
@example(text="a\tb", max_bytes=80)
@example(text="t\ud800x", max_bytes=80)
def test_printable_ascii_text_is_shown_as_the_full_path_shows_it(text: str, max_bytes: int) -> None:
    # ASCII text is sized by its length and printable ASCII shown as it is: the same as
    # encoding it, escaping and cutting it.
    assert size(text) == len(text.encode("utf-8", errors="surrogatepass"))
    assert shown_field(text, max_bytes) == cut(escaped(text), max_bytes)


def test_codes_are_listed_once_in_order() -> None:
    found = [
        Violation(code=code, field="f", message="m")
        for code in (Code.NETWORK_DUPLICATED, Code.NETWORK_NOT_FOUND, Code.NETWORK_DUPLICATED)
    ]
    assert codes_once(found) == ["NetworkDuplicated", "NetworkNotFound"]


@pytest.mark.parametrize("code", range(0x100))
def test_printable_ascii_says_what_isascii_and_isprintable_say_of_each_character(code: int) -> None:
    text = f"a{chr(code)}b"
    assert printable_ascii(text) is (text.isascii() and text.isprintable())


@given(st.text())
@example("")
@example("\ud800")
def test_printable_ascii_says_what_isascii_and_isprintable_say(text: str) -> None:
    assert printable_ascii(text) is (text.isascii() and text.isprintable())
