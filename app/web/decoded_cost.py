"""What decoding a JSON request body holds beyond its bytes, counted chunk by chunk as it
arrives: the values and containers it begins outside strings, never what a string holds.
"""

from __future__ import annotations

from typing import Final

# A body beyond this also counts what decoding it will hold: up to 24 times its bytes (3 MiB of
# `[{},{},...]` is 72 MiB of dicts). Below it, that is at most ~1.5 MiB, for one body at a time.
DECODED_FROM_BYTES: Final = 64 * 1024
# Bytes of decoded JSON per value or container begun (a comma, `[` or `{`): at most 114 with
# orjson on CPython 3.11 (distinct keys; 36 for `{}`, 96 for `{"a":0}`), plus the text itself.
DECODED_PER_TOKEN: Final = 128

_STRUCTURE: Final = b",[{"
_ESCAPED: Final = b'\\"'  # what a backslash before them keeps from ending a string or escaping
_NEITHER_QUOTE_NOR_STRUCTURE: Final = bytes(b for b in range(256) if b not in b'",[{')
# json.loads, which answers what orjson refuses, reads UTF-16 and UTF-32 too: such a body has a
# NUL among its first four bytes. Its `"` bytes may be halves of other characters, so every
# `,` `[` `{` byte of it counts.
_ENCODING_WITHIN: Final = 4


class DecodedCost:
    """What decoding one body holds beyond its bytes, at most, fed its chunks in order.

    A string (a snapshot's YAML text, an annotation) decodes to its text, whatever the text is:
    its `,` `[` `{` are not structure. Only quotes decide what is in a string, once escapes are
    dropped: pairs of backslashes first, as JSON pairs a run of them, then a backslash and a
    quote, and a backslash ending a chunk with the next chunk's first byte. All of it is bytes
    methods, which run in C: this sees every byte of a large body.
    """

    __slots__ = ("_escaped", "_in_string", "_seen", "_wide")

    def __init__(self) -> None:
        self._in_string = False
        self._escaped = False  # the next byte is the second of an escape
        self._seen = 0  # bytes, counted up to _ENCODING_WITHIN
        self._wide = False  # UTF-16 or UTF-32

    def of(self, chunk: bytes) -> int:
        """What decoding ``chunk``, the body's next bytes, holds beyond them, at most."""
        if self._seen < _ENCODING_WITHIN:
            self._wide = self._wide or 0 in chunk[: _ENCODING_WITHIN - self._seen]
            self._seen += len(chunk)
        if self._wide:
            return DECODED_PER_TOKEN * (len(chunk) - len(chunk.translate(None, _STRUCTURE)))
        return DECODED_PER_TOKEN * self._outside_strings(chunk)

    def _outside_strings(self, chunk: bytes) -> int:
        """How many `,` `[` `{` of ``chunk`` are outside strings."""
        if self._escaped and chunk:
            if chunk[0] in _ESCAPED:
                chunk = chunk[1:]
            self._escaped = False
        if b"\\" in chunk:
            chunk = chunk.replace(b"\\\\", b"")
            self._escaped = chunk.endswith(b"\\")
            chunk = chunk.replace(b'\\"', b"")
        # Quotes and structure are all that matter now; and two quotes side by side (a string
        # without structure, mostly) change for no other byte whether it is in a string.
        kept = chunk.translate(None, _NEITHER_QUOTE_NOR_STRUCTURE).replace(b'""', b"")
        parts = kept.split(b'"')
        outside = parts[self._in_string :: 2]
        self._in_string ^= len(parts) % 2 == 0
        return sum(map(len, outside))
