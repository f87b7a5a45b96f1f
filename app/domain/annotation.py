"""The ``networking.gke.io/interfaces`` annotation: its keys and a strict parser.

The value is a JSON list of ``{interfaceName, network | interface}`` objects (GKE InterfaceRef).
"""

from __future__ import annotations

import json
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
    if len(raw) > MEMO_MAX_CHARS:
        return _parse(raw)
    return _parse_memo(raw)


# Built once: json.loads with an argument builds a decoder on every call.
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def _parse(raw: str) -> tuple[InterfaceRef, ...]:
    decoded = _strict_json(raw)
    entries = as_list(decoded)
    if not entries:
        raise AnnotationSyntaxError("must be a non-empty JSON list of interface entries")
    return tuple(_entry(position, item) for position, item in enumerate(entries))


def _strict_json(raw: str) -> object:
    try:
        return _DECODER.decode(raw)
    except AnnotationSyntaxError:
        raise
    except RecursionError:
        raise AnnotationSyntaxError("is not valid JSON: nested too deeply") from None
    except ValueError as error:
        reason = error.msg if isinstance(error, json.JSONDecodeError) else "invalid number"
        raise AnnotationSyntaxError(f"is not valid JSON: {reason}") from None


_parse_memo: Final = lru_cache(maxsize=256)(_parse)


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
    return InterfaceRef(name, network, interface)  # positional: ~160 ns less per entry


def _not_a_string(position: int, key: str) -> AnnotationSyntaxError:
    return AnnotationSyntaxError(f"entry {position} has a {key} that is not a non-empty string")
