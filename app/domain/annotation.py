"""The ``networking.gke.io/interfaces`` annotation: its keys and a strict parser.

The value is a JSON list of ``{interfaceName, network | interface}`` objects (GKE InterfaceRef).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from app.domain.fields import as_list
from app.domain.verdict import shown

INTERFACES_ANNOTATION: Final = "networking.gke.io/interfaces"
DEFAULT_INTERFACE_ANNOTATION: Final = "networking.gke.io/default-interface"
WIRING_KEYS: Final = (INTERFACES_ANNOTATION, DEFAULT_INTERFACE_ANNOTATION)
"""The annotations that wire a pod; the rules read no other."""
PRIMARY_INTERFACE: Final = "eth0"
PRIMARY_NETWORK: Final = "default"
# An 8-NIC annotation is ~400 characters; longer values are not kept (bounded memory).
MEMO_MAX_CHARS: Final = 4096
# No machine GKE runs attaches more than 18 interfaces: GCE gives an instance at most 10 vNICs,
# and the GPU machines with the most RDMA NICs add 8 (A3 Ultra, A4; docs/rules.md). An entry is
# at most ~300 characters (a Network's name is a 253-character DNS subdomain). A longer list is
# refused from its length, unparsed: parsing is what a writer could make cost seconds.
MAX_ENTRIES: Final = 64
MAX_CHARS: Final = 32 * 1024
MOST_INTERFACES: Final = 18


class AnnotationSyntaxError(ValueError):
    """The annotation value is not a well-formed interface list; the text says why."""


@dataclass(frozen=True, slots=True)
class InterfaceRef:
    """One entry: a pod interface bound to a Network object, or to a NetworkInterface object."""

    interface_name: str
    network: str | None = None
    interface: str | None = None

    def pair(self) -> str:
        """``eth1->gpu-nic-0`` (or ``eth1->interface:x`` for a NetworkInterface reference)."""
        target = self.network if self.network is not None else f"interface:{self.interface}"
        return f"{shown(self.interface_name)}->{shown(target)}"


# Equal entries read anywhere (annotations, the recipe, the profiles) are one object while they
# are in use: two entry lists then compare item by item by identity, as tuples do, rather than
# by a call per entry, and a template's list is compared with the mapping it is held to on every
# review. Keyed by the three strings; least recently used entries are let go.
_INTERNED_MAX: Final = 4096
_interned: Final = lru_cache(maxsize=_INTERNED_MAX)(InterfaceRef)


def interface_ref(
    interface_name: str, network: str | None = None, interface: str | None = None
) -> InterfaceRef:
    """The InterfaceRef of these fields, the same object each time while it is in use."""
    return _interned(interface_name, network, interface)


def _reject_constant(name: str) -> object:
    # Python's json accepts NaN/Infinity; GKE's Go decoder does not, so neither do we.
    raise AnnotationSyntaxError(f"is not valid JSON: {name} is not a JSON value")


def parse_interfaces(raw: str) -> tuple[InterfaceRef, ...]:
    """Decode the annotation value; raises AnnotationSyntaxError with a short reason.

    Well-formed values of ordinary size are memoised: the same few annotation strings (a
    runtime's, inherited by every TrainJob that references it) arrive again and again, and the
    result is immutable. Errors and oversized values are decoded every time.
    """
    if len(raw) > MEMO_MAX_CHARS:
        return _parse(raw)
    return _parse_memo(raw)


# Built once: json.loads with an argument builds a decoder on every call.
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def _parse(raw: str) -> tuple[InterfaceRef, ...]:
    _check_length(raw)
    entries = as_list(_strict_json(raw, _DECODER))
    if not entries:
        raise AnnotationSyntaxError("must be a non-empty JSON list of interface entries")
    try:
        refs = tuple(_entry(position, item) for position, item in enumerate(entries))
    except AnnotationSyntaxError:
        _check_keys(raw)  # a key GKE reads otherwise is the first thing to fix
        raise
    # GKE's Go decoder reads every key that folds onto a field, the last one winning; Python's
    # keeps the last of exact repeats only. Each entry read has two distinct field keys, and
    # every object key in the text is followed by a colon: when the text holds no more colons
    # than that, it holds exactly those keys, each once, and reads the same in both. Anything
    # else (another key, a repeat, a colon inside a string) takes the exact reading.
    if raw.count(":") != 2 * len(refs):
        _check_keys(raw)
    if not raw.isascii() or "\\" in raw:  # text or an escape: may hold half a surrogate pair
        return tuple(_as_go_reads(ref) for ref in refs)
    return refs


def _check_length(raw: str) -> None:
    """Refuse a list longer than any machine can attach before a character of it is parsed.
    Entries are counted as the objects begun (``{``), a C-level count: an entry is an object,
    so a list of more entries holds more of them."""
    if len(raw) > MAX_CHARS:
        raise AnnotationSyntaxError(
            f"is {len(raw)} characters long; {_NO_MACHINE} (nicguard reads at most {MAX_CHARS})"
        )
    if (objects := raw.count("{")) > MAX_ENTRIES:
        raise AnnotationSyntaxError(
            f"holds {objects} JSON objects; {_NO_MACHINE} (nicguard reads at most "
            f"{MAX_ENTRIES} entries)"
        )


_NO_MACHINE: Final = (
    f"no machine GKE runs attaches more than {MOST_INTERFACES} interfaces, so no list that long "
    "is one GKE can attach"
)

_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _as_go_reads(ref: InterfaceRef) -> InterfaceRef:
    """Go decodes an escape of half a surrogate pair as U+FFFD where Python keeps the half: two
    names that differ only there are one name to GKE."""
    network, interface = ref.network, ref.interface
    return interface_ref(
        _LONE_SURROGATE.sub("\ufffd", ref.interface_name),
        None if network is None else _LONE_SURROGATE.sub("\ufffd", network),
        None if interface is None else _LONE_SURROGATE.sub("\ufffd", interface),
    )


def _strict_json(raw: str, decoder: json.JSONDecoder) -> object:
    try:
        return decoder.decode(raw)
    except AnnotationSyntaxError:
        raise
    except RecursionError:
        raise AnnotationSyntaxError("is not valid JSON: nested too deeply") from None
    except ValueError as error:
        reason = error.msg if isinstance(error, json.JSONDecodeError) else "invalid number"
        raise AnnotationSyntaxError(f"is not valid JSON: {reason}") from None


_parse_memo: Final = lru_cache(maxsize=256)(_parse)

_FIELDS: Final = ("interfaceName", "network", "interface")
_FOLDED_FIELDS: Final = {name.upper(): name for name in _FIELDS}
# Go's encoding/json (>= 1.21, appendFoldedName) folds a key to match a field: ASCII letters
# upper-cased, any other rune r to unicode.ToUpper(unicode.ToLower(r)). By Unicode's simple
# case mappings these four are the only non-ASCII runes that fold to an ASCII letter.
_NON_ASCII_FOLDS: Final = {"\u212a": "K", "\u017f": "S", "\u0130": "I", "\u0131": "I"}


def go_fold(key: str) -> str:
    """``key`` as Go's encoding/json folds it to match a struct field, where that matters: a
    non-ASCII rune that folds to no ASCII letter is kept as it is (it matches no field)."""
    if key.isascii():
        return key.upper()
    return "".join(
        char.upper() if char.isascii() else _NON_ASCII_FOLDS.get(char, char) for char in key
    )


class _KeyedObject(dict[str, object]):
    """A decoded JSON object that remembers its keys in text order, repeats included."""

    __slots__ = ("keys_given",)

    keys_given: tuple[str, ...]


def _keyed_object(pairs: list[tuple[str, object]]) -> _KeyedObject:
    decoded = _KeyedObject(pairs)
    decoded.keys_given = tuple(key for key, _ in pairs)
    return decoded


_PAIRS_DECODER: Final = json.JSONDecoder(
    parse_constant=_reject_constant, object_pairs_hook=_keyed_object
)


def _check_keys(raw: str) -> None:
    """Refuse an entry whose keys GKE reads otherwise than nicguard: a field spelled another
    way that Go folds onto it (Go matches keys case-insensitively), or given twice (Go keeps
    the last match). Keys that fold onto no field are ignored, as GKE ignores them."""
    entries = _strict_json(raw, _PAIRS_DECODER)
    assert isinstance(entries, list)  # noqa: S101 - text already decoded as a list
    for position, item in enumerate(entries):
        if isinstance(item, _KeyedObject):
            _check_entry_keys(position, item)


def _check_entry_keys(position: int, item: _KeyedObject) -> None:
    seen: set[str] = set()
    for key in item.keys_given:
        field = _FOLDED_FIELDS.get(go_fold(key))
        if field is None:
            continue
        if key != field:
            raise AnnotationSyntaxError(
                f'{_entry_named(position, item)} has the key "{_spelled(key)}", which GKE reads as '
                f'"{field}" (it matches keys case-insensitively); spell it "{field}" exactly'
            )
        if field in seen:
            raise AnnotationSyntaxError(
                f'{_entry_named(position, item)} gives "{field}" twice (GKE keeps the last); '
                "give each key once"
            )
        seen.add(field)


def _spelled(key: str) -> str:
    # The Kelvin sign looks like K: a key that is not ASCII is shown with its code points.
    return shown(key).encode("ascii", "backslashreplace").decode("ascii")


def _entry_named(position: int, item: dict[str, object]) -> str:
    name = item.get("interfaceName")
    if isinstance(name, str) and name:
        return f"entry {position} ({shown(name)})"
    return f"entry {position}"


def _entry(position: int, item: object) -> InterfaceRef:
    # Decoded JSON: an object is a dict with string keys, nothing else is a mapping. Checked
    # inline, without helpers: every entry of every annotation judged passes here.
    if not isinstance(item, dict):
        raise AnnotationSyntaxError(f"entry {position} is not a JSON object")
    name = item.get("interfaceName")
    if not isinstance(name, str) or not name:
        raise AnnotationSyntaxError(f"entry {position} has no non-empty string interfaceName")
    network = item.get("network")
    if network is not None and (not isinstance(network, str) or not network):
        raise _not_a_string(position, "network")
    interface = item.get("interface")
    if interface is not None and (not isinstance(interface, str) or not interface):
        raise _not_a_string(position, "interface")
    if (network is None) == (interface is None):
        which = "both network and" if network is not None else "neither network nor"
        raise AnnotationSyntaxError(
            f"entry {position} ({shown(name)}) has {which} interface; exactly one is required"
        )
    return _interned(name, network, interface)


def _not_a_string(position: int, key: str) -> AnnotationSyntaxError:
    return AnnotationSyntaxError(f"entry {position} has a {key} that is not a non-empty string")
