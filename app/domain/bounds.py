"""What a request can make nicguard write is bounded and escaped, whatever the object holds
(docs/rules.md, bounded output): text cut to a size in UTF-8 bytes, codes listed once."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from app.domain.verdict import Violation

# The ASCII characters str.isprintable refuses: C0 controls and DEL.
_CONTROLS: Final = bytes(range(0x20)) + b"\x7f"


def printable_ascii(text: str) -> bool:
    """``text.isascii() and text.isprintable()``, about half the cost for a text of a hundred
    characters or more: isprintable looks each character up in the Unicode tables."""
    return text.isascii() and len(text.encode().translate(None, _CONTROLS)) == len(text)


def escaped(text: str) -> str:
    """``text`` with no raw control character: unprintable text is backslash-escaped."""
    if text.isprintable():
        return text
    return text.encode("unicode_escape", errors="backslashreplace").decode("ascii")


def size(text: str) -> int:
    """UTF-8 bytes; surrogatepass: a lone surrogate (valid JSON "\\ud800") must not raise."""
    if text.isascii():  # a flag of the string, not a scan: its length is its size
        return len(text)
    return len(text.encode("utf-8", errors="surrogatepass"))


def cut(text: str, max_bytes: int) -> str:
    """``text`` in at most ``max_bytes`` UTF-8 bytes, ending in "…" when cut."""
    if size(text) <= max_bytes:
        return text
    kept = text.encode("utf-8", errors="surrogatepass")[: max(max_bytes - 3, 0)]
    return kept.decode("utf-8", errors="ignore") + "…"


def shown_field(text: str, max_bytes: int) -> str:
    """Object-supplied text as a log or response field: escaped, then cut."""
    if len(text) <= max_bytes and printable_ascii(text):
        return text  # what every field of an apiserver's review is: nothing to escape or cut
    return cut(escaped(text), max_bytes)


def codes_once(violations: Iterable[Violation]) -> list[str]:
    """Each violation code once, in order of first appearance."""
    codes: list[str] = [v.code for v in violations]  # a Code is its value, a str
    return codes if len(codes) == 1 else list(dict.fromkeys(codes))
