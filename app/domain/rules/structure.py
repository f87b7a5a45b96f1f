"""Structural rules of a wired pod template: shape, names, duplicates (docs/rules.md).

These need no cluster state; they also yield the secondary entries for the other rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from app.domain.annotation import (
    DEFAULT_INTERFACE_ANNOTATION,
    INTERFACES_ANNOTATION,
    MEMO_MAX_CHARS,
    PRIMARY_INTERFACE,
    PRIMARY_NETWORK,
    AnnotationSyntaxError,
    InterfaceRef,
    parse_interfaces,
)
from app.domain.verdict import Code, Violation, shown
from app.domain.wiring import Wiring

# GKE's two names of the pod network: "pod-network" is the older one (gke-networking-api
# IsDefaultNetwork). Either may back eth0; neither may back a secondary interface.
RESERVED_NETWORKS: Final = frozenset({PRIMARY_NETWORK, "pod-network"})
# Linux dev_valid_name(): shorter than IFNAMSIZ (16) bytes, not "." or "..", no "/", ":" or space.
# Control characters (C0, DEL, C1) the kernel accepts, but no NIC is named with them and a
# terminal printing the name would execute them.
_INTERFACE_NAME_MAX_BYTES: Final = 15
_INTERFACE_NAME_FORBIDDEN: Final = re.compile(r"[/:\s\x00-\x1f\x7f-\x9f]")


@dataclass(frozen=True, slots=True)
class Structure:
    """Structural violations, and the secondary entries when the annotation could be read.

    ``secondaries`` is None when the annotation is malformed or its primary entry is wrong:
    both stop further checks of the annotation.
    """

    violations: tuple[Violation, ...]
    secondaries: tuple[InterfaceRef, ...] | None


def structure_of(wiring: Wiring) -> Structure:
    """Apply every structural rule to a wired template; never raises.

    The result depends on the wiring alone and is immutable, so string-valued wirings of
    ordinary size are memoised: a runtime's wiring comes back with every TrainJob on it, and
    runtimes stamped from one template carry the same one (the audit judges each of them).
    """
    if _memoisable(wiring):
        return _structure_memo(wiring)
    return _structure(wiring)


def _memoisable(wiring: Wiring) -> bool:
    # Only strings: a malformed value may be a list (not hashable), and True == 1 as keys.
    return all(
        value is None or (type(value.value) is str and len(value.value) <= MEMO_MAX_CHARS)
        for value in (wiring.interfaces, wiring.default_interface)
    )


def _structure(wiring: Wiring) -> Structure:
    violations = list(_default_interface(wiring))
    assert wiring.interfaces is not None  # noqa: S101 - callers pass wired templates only
    raw = wiring.interfaces.value
    field = str(wiring.interfaces.path)
    if not isinstance(raw, str):
        return _stop(
            violations,
            Code.INTERFACES_ANNOTATION_MALFORMED,
            field,
            f"{INTERFACES_ANNOTATION} must be a string holding a JSON list",
        )
    try:
        entries = parse_interfaces(raw)
    except AnnotationSyntaxError as error:
        return _stop(
            violations,
            Code.INTERFACES_ANNOTATION_MALFORMED,
            field,
            f"{INTERFACES_ANNOTATION} {error}",
        )
    primary = entries[0]
    if primary.interface_name != PRIMARY_INTERFACE or primary.network not in RESERVED_NETWORKS:
        return _stop(
            violations,
            Code.PRIMARY_INTERFACE_INVALID,
            wiring.entry_path(0),
            f"{INTERFACES_ANNOTATION} must start with eth0->default (the pod network), "
            f"found {primary.pair()} first",
        )
    violations.extend(_entry_rules(wiring, entries))
    violations.extend(_duplicated_interfaces(wiring, entries))
    violations.extend(_duplicated_networks(wiring, entries))
    return Structure(violations=tuple(violations), secondaries=entries[1:])


_structure_memo: Final = lru_cache(maxsize=256)(_structure)


def _stop(violations: list[Violation], code: Code, field: str, message: str) -> Structure:
    violations.append(Violation(code=code, field=field, message=message))
    return Structure(violations=tuple(violations), secondaries=None)


def _default_interface(wiring: Wiring) -> Iterator[Violation]:
    value = None if wiring.default_interface is None else wiring.default_interface.value
    if value == PRIMARY_INTERFACE:
        return
    if value is None:
        found = "is missing"
    elif isinstance(value, str):
        found = f'is "{shown(value)}"'
    else:
        found = "is not a string"
    yield Violation(
        code=Code.DEFAULT_INTERFACE_INVALID,
        field=wiring.default_interface_path(),
        message=f"{DEFAULT_INTERFACE_ANNOTATION} {found}; pods wired with {INTERFACES_ANNOTATION} "
        'need it set to "eth0"',
    )


def valid_interface_name(name: str) -> bool:
    """Whether Linux accepts ``name`` for a network interface (GKE RDMA names such as gpu0rdma0)."""
    # On every entry of every request: ASCII letters and digits (eth1, gpu0rdma0) need no
    # encoding nor regex; anything else takes the full test.
    if name.isascii() and name.isalnum():
        return len(name) <= _INTERFACE_NAME_MAX_BYTES
    return (
        0 < len(name.encode("utf-8", "surrogatepass")) <= _INTERFACE_NAME_MAX_BYTES
        and name not in (".", "..")
        and _INTERFACE_NAME_FORBIDDEN.search(name) is None
    )


def _entry_rules(wiring: Wiring, entries: tuple[InterfaceRef, ...]) -> Iterator[Violation]:
    for position, entry in enumerate(entries[1:], start=1):
        if not valid_interface_name(entry.interface_name):
            yield Violation(
                code=Code.INTERFACE_NAME_INVALID,
                field=wiring.entry_path(position, "interfaceName"),
                message=f'entry {position} names interface "{shown(entry.interface_name)}", '
                "which is not a valid Linux interface name (1-15 bytes, no whitespace, "
                'control character, "/" or ":", not "." or "..")',
            )
        if entry.network in RESERVED_NETWORKS:
            yield Violation(
                code=Code.NETWORK_RESERVED,
                field=wiring.entry_path(position, "network"),
                message=f'{entry.pair()} uses the reserved network "{entry.network}"; '
                "it belongs to eth0, a secondary interface needs a GPU-NIC Network",
            )


def _duplicated_interfaces(
    wiring: Wiring, entries: tuple[InterfaceRef, ...]
) -> Iterator[Violation]:
    first_seen: dict[str, int] = {}
    for position, entry in enumerate(entries):
        first = first_seen.setdefault(entry.interface_name, position)
        if first != position:
            yield Violation(
                code=Code.INTERFACE_DUPLICATED,
                field=wiring.entry_path(position, "interfaceName"),
                message=f"interface {shown(entry.interface_name)} is mapped twice (entries {first} "
                f"and {position}); each interface may appear once",
            )


def _duplicated_networks(wiring: Wiring, entries: tuple[InterfaceRef, ...]) -> Iterator[Violation]:
    first_seen: dict[str, int] = {}
    for position, entry in enumerate(entries[1:], start=1):
        if entry.network is None:
            continue
        first_position = first_seen.setdefault(entry.network, position)
        if first_position != position:
            first = entries[first_position]
            yield Violation(
                code=Code.NETWORK_DUPLICATED,
                field=wiring.entry_path(position, "network"),
                message=f"network {shown(entry.network)} is mapped to both "
                f"{shown(first.interface_name)} and {shown(entry.interface_name)}; "
                "each GPU NIC needs its own Network",
            )
