"""The ``networking.gke.io/interfaces`` annotation: its keys and a strict parser.

The value is a JSON list of ``{interfaceName, network | interface}`` objects (GKE InterfaceRef).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from app.domain.fields import JsonMap, as_list, as_map
from app.domain.verdict import shown

INTERFACES_ANNOTATION: Final = "networking.gke.io/interfaces"
DEFAULT_INTERFACE_ANNOTATION: Final = "networking.gke.io/default-interface"
WIRING_KEYS: Final = (INTERFACES_ANNOTATION, DEFAULT_INTERFACE_ANNOTATION)
"""The annotations that wire a pod; the rules read no other."""
PRIMARY_INTERFACE: Final = "eth0"
PRIMARY_NETWORK: Final = "default"
# An 8-NIC annotation is ~400 characters; longer values are not kept (bounded memory).
_MEMO_MAX_CHARS: Final = 4096


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


def _reject_constant(name: str) -> object:
    # Python's json accepts NaN/Infinity; GKE's Go decoder does not, so neither do we.
    raise AnnotationSyntaxError(f"is not valid JSON: {name} is not a JSON value")


def parse_interfaces(raw: str) -> tuple[InterfaceRef, ...]:
    """Decode the annotation value; raises AnnotationSyntaxError with a short reason.

    Well-formed values of ordinary size are memoised: the same few annotation strings (a
    runtime's, inherited by every TrainJob that references it) arrive again and again, and the
    result is immutable. Errors and oversized values are decoded every time.
    """
    if len(raw) > _MEMO_MAX_CHARS:
        return _parse(raw)
    return _parse_memo(raw)


def _parse(raw: str) -> tuple[InterfaceRef, ...]:
    try:
        decoded = json.loads(raw, parse_constant=_reject_constant)
    except AnnotationSyntaxError:
        raise
    except RecursionError:
        raise AnnotationSyntaxError("is not valid JSON: nested too deeply") from None
    except ValueError as error:
        reason = error.msg if isinstance(error, json.JSONDecodeError) else "invalid number"
        raise AnnotationSyntaxError(f"is not valid JSON: {reason}") from None
    entries = as_list(decoded)
    if not entries:
        raise AnnotationSyntaxError("must be a non-empty JSON list of interface entries")
    return tuple(_entry(position, item) for position, item in enumerate(entries))


_parse_memo: Final = lru_cache(maxsize=256)(_parse)


def _entry(position: int, item: object) -> InterfaceRef:
    entry = as_map(item)
    if entry is None:
        raise AnnotationSyntaxError(f"entry {position} is not a JSON object")
    name = entry.get("interfaceName")
    if not isinstance(name, str) or not name:
        raise AnnotationSyntaxError(f"entry {position} has no non-empty string interfaceName")
    network = _optional_string(position, entry, "network")
    interface = _optional_string(position, entry, "interface")
    if (network is None) == (interface is None):
        which = "both network and" if network is not None else "neither network nor"
        raise AnnotationSyntaxError(
            f"entry {position} ({shown(name)}) has {which} interface; exactly one is required"
        )
    return InterfaceRef(interface_name=name, network=network, interface=interface)


def _optional_string(position: int, entry: JsonMap, key: str) -> str | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise AnnotationSyntaxError(f"entry {position} has a {key} that is not a non-empty string")
    return value
