"""Plain scalars resolved as goyaml.v2 resolves them (YAML 1.1: ``y``/``on``/``no`` booleans,
``0x``/``0o``/``0b``/leading-zero octal integers, underscores dropped), with Go's ``strconv``
number syntax: what kubectl and Trainer read, not what PyYAML reads.
"""

from __future__ import annotations

import math
import re
from typing import Final

# A resolved scalar: Go's dynamic type ("str", "int", "float", "bool", "null") and the value.
# Integers that only fit uint64 are "int" too: JSON and every reader see the same number.
Resolved = tuple[str, object]

_BOOLS: Final = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE"), True),
    **dict.fromkeys(("on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE"), False),
    **dict.fromkeys(("off", "Off", "OFF"), False),
}
_NULLS: Final = frozenset(("", "~", "null", "Null", "NULL"))
_SPECIAL_FLOATS: Final = {
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
# resolve.go's first-byte hint: only these may resolve to anything but a string.
_HINTED: Final = frozenset("+-0123456789yYnNtTfFoO~.")
_YAML_STYLE_FLOAT: Final = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT: Final = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")
_MAX_INT64: Final = (1 << 63) - 1
_MAX_UINT64: Final = (1 << 64) - 1
_DIGITS: Final = "0123456789abcdefghijklmnopqrstuvwxyz"
_MAX_DIGITS: Final = 64  # a uint64 in base 2
_SHORT_DECIMAL: Final = 18  # digits that always fit an int64

MERGE: Final = "<<"


def resolve_plain(text: str) -> Resolved:
    """What goyaml.v2 decodes an untagged plain scalar ``text`` into, for an ``interface{}``.

    Timestamps stay strings there (decode.go keeps ``n.value`` for interface targets), so they
    need no case of their own: nothing that looks like one is also a number.
    """
    if not text or text[0] not in _HINTED:
        return ("null", None) if not text else ("str", text)
    if text.isdigit() and text.isascii() and len(text) <= _SHORT_DECIMAL and text[0] != "0":
        return ("int", int(text))  # the common case, decided at once: a short decimal
    if text in _BOOLS:
        return ("bool", _BOOLS[text])
    if text in _NULLS:
        return ("null", None)
    if text in _SPECIAL_FLOATS:
        return ("float", _SPECIAL_FLOATS[text])
    if text[0] == ".":
        return _float(text) if _DOT_FLOAT.fullmatch(text) else ("str", text)
    if text[0] in "yYnNtTfFoO~":
        return ("str", text)
    plain = text.replace("_", "")
    number = _parse_int(plain)
    if number is None and plain[:1] != "+":
        number = _parse_uint(plain, 0)  # beyond int64: the uint64 range
    if number is not None:
        return ("int", number)
    if _YAML_STYLE_FLOAT.fullmatch(plain):
        found = _float(plain)
        if found[0] == "float":
            return found
    # resolve.go's last tries: ParseInt(plain[2:], 2) after "0b" reads a sign there ("0b-101");
    # its other ones (ParseUint after "0b", "-0b") find nothing base 0 did not read already.
    if plain.startswith("0b"):
        number = _parse_int(plain[2:], 2)
        if number is not None:
            return ("int", number)
    return ("str", text)


def _float(text: str) -> Resolved:
    """Go's ParseFloat on decimal syntax: out of range is an error, so the text stays a string."""
    value = float(text)
    return ("str", text) if math.isinf(value) else ("float", value)


def _parse_int(text: str, base: int = 0) -> int | None:
    """Go's strconv.ParseInt(text, base, 64), or None where it returns an error."""
    negative = text[:1] == "-"
    if text[:1] in "+-" and text:
        text = text[1:]
    magnitude = _parse_uint(text, base)
    if magnitude is None:
        return None
    if negative:
        return -magnitude if magnitude <= _MAX_INT64 + 1 else None
    return magnitude if magnitude <= _MAX_INT64 else None


def _parse_uint(text: str, base: int) -> int | None:
    """Go's strconv.ParseUint(text, base, 64) on text without underscores, or None on error."""
    if not text:
        return None
    if base == 0:
        base = 10
        if text[0] == "0":
            prefix = text[1:2].lower()
            if len(text) >= 3 and prefix in ("b", "o", "x"):
                base, text = {"b": 2, "o": 8, "x": 16}[prefix], text[2:]
            else:
                base, text = 8, text[1:]
    text = text.lstrip("0")  # zeros add nothing; a long run of them must not cost a loop
    if len(text) > _MAX_DIGITS:
        return None  # beyond 64 bits in any base, or not digits: ParseUint fails either way
    value = 0
    for char in text.lower():
        digit = _DIGITS.find(char)
        if digit < 0 or digit >= base:
            return None
        value = value * base + digit
        if value > _MAX_UINT64:
            return None
    return value
