"""Structural rules of a wired pod template: shape, names, duplicates (docs/rules.md). Bound
templates are held to AICR's conventions, unbound ones to what GKE enforces.

These need no cluster state; they also yield the entries for the other rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
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
from app.domain.rules import counted
from app.domain.value_type import value_type
from app.domain.verdict import Code, Violation, shown
from app.domain.wiring import AnnotationValue, Wiring

# GKE's two names of the pod network: "pod-network" is the older one (gke-networking-api
# IsDefaultNetwork). Either may back eth0; on a bound template neither may back another one.
RESERVED_NETWORKS: Final = frozenset({PRIMARY_NETWORK, "pod-network"})
# Linux dev_valid_name(): shorter than IFNAMSIZ (16) bytes, not "." or "..", no "/", ":" or space.
# Control characters (C0, DEL, C1) the kernel accepts, but no NIC is named with them and a
# terminal printing the name would execute them.
_INTERFACE_NAME_MAX_BYTES: Final = 15
_INTERFACE_NAME_FORBIDDEN: Final = re.compile(r"[/:\s\x00-\x1f\x7f-\x9f]")


@value_type
class Structure:
    """Structural violations, and the annotation's entries when later rules may judge them
    (an entry's position in the list is its index; ``eth0`` is entry 0 on a bound template).

    ``entries`` is None when the annotation is malformed or, on a bound template, its primary
    entry is wrong: both stop further checks of the annotation.
    """

    violations: tuple[Violation, ...]
    entries: tuple[InterfaceRef, ...] | None
    networks: frozenset[str] = frozenset()
    """The Network objects the entries name (no pod network): what the Network rules look up,
    a set, so that the common case (all of them usable) is one subset test."""
    notes: tuple[str, ...] = ()
    """What is said of the entries without judging them (NetworkInterface references)."""


def on_pod_network(entry: InterfaceRef) -> bool:
    """Whether ``entry`` names GKE's pod network (``default`` or ``pod-network``), which is no
    Network object to look up: every other entry is a secondary one."""
    return entry.network in RESERVED_NETWORKS


def is_secondary_network(entry: InterfaceRef) -> bool:
    """Whether ``entry`` names a Network object: a network, and not the pod network."""
    return entry.network is not None and entry.network not in RESERVED_NETWORKS


def structure_of(wiring: Wiring, *, bound: bool) -> Structure:
    """Apply every structural rule to a wired template; never raises. A ``bound`` template (to
    the recipe or a profile) is held to AICR's conventions, any other to what GKE enforces
    (docs/rules.md says which rule is which).

    The result depends on the wiring alone and is immutable, so string-valued wirings of
    ordinary size are memoised: a runtime's wiring comes back with every TrainJob on it, and
    runtimes stamped from one template carry the same one (the audit judges each of them).
    """
    if _memoisable(wiring):
        return _structure_memo(wiring, bound=bound)
    return _structure(wiring, bound=bound)


def _memoisable(wiring: Wiring) -> bool:
    # Only strings: a malformed value may be a list (not hashable), and True == 1 as keys.
    interfaces, default = wiring.interfaces, wiring.default_interface
    return _memoisable_value(interfaces) and _memoisable_value(default)


def _memoisable_value(value: AnnotationValue | None) -> bool:
    return value is None or (type(value.value) is str and len(value.value) <= MEMO_MAX_CHARS)


def _structure(wiring: Wiring, *, bound: bool) -> Structure:
    violations = list(_aicr_default_interface(wiring) if bound else _gke_default_type(wiring))
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
    if bound:
        primary = entries[0]
        if primary.interface_name != PRIMARY_INTERFACE or not on_pod_network(primary):
            return _stop(
                violations,
                Code.PRIMARY_INTERFACE_INVALID,
                wiring.entry_path(0),
                f"{INTERFACES_ANNOTATION} must start with eth0->default (the pod network), "
                f"found {primary.pair()} first",
            )
        violations.extend(_entry_rules(wiring, entries))
        networked: range | tuple[int, ...] = range(1, len(entries))
    else:
        violations.extend(_gke_default_interface(wiring, entries))
        violations.extend(_invalid_names(wiring, entries))
        # GKE reads an entry on the pod network as the pod network, wherever it stands.
        networked = tuple(p for p, entry in enumerate(entries) if not on_pod_network(entry))
    violations.extend(_duplicated_interfaces(wiring, entries))
    violations.extend(_duplicated_networks(wiring, entries, networked))
    named = frozenset(e.network for e in entries if e.network is not None) - RESERVED_NETWORKS
    notes = tuple(
        f"{entry.pair()} (entry {position}) uses a NetworkInterface; not checked"
        for position, entry in enumerate(entries)
        if entry.interface is not None
    )
    return Structure(violations=tuple(violations), entries=entries, networks=named, notes=notes)


_structure_memo: Final = lru_cache(maxsize=256)(_structure)


def _stop(violations: list[Violation], code: Code, field: str, message: str) -> Structure:
    violations.append(Violation(code=code, field=field, message=message))
    return Structure(violations=tuple(violations), entries=None)


def _aicr_default_interface(wiring: Wiring) -> Iterator[Violation]:
    """AICR's runtime convention, for bound templates: the key set to ``eth0``."""
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


def _gke_default_type(wiring: Wiring) -> Iterator[Violation]:
    """An unbound template's key that is not a string: a Pod's annotations are strings, so no
    Pod can carry it (and a runtime holding one fails Trainer's decoding of its pod template)."""
    value = None if wiring.default_interface is None else wiring.default_interface.value
    if value is None or isinstance(value, str):
        return
    yield Violation(
        code=Code.DEFAULT_INTERFACE_INVALID,
        field=wiring.default_interface_path(),
        message=f"{DEFAULT_INTERFACE_ANNOTATION} is not a string; GKE reads it as the name of "
        f"the interface that carries the pod's default route",
    )


def _gke_default_interface(
    wiring: Wiring, entries: tuple[InterfaceRef, ...]
) -> Iterator[Violation]:
    """An unbound template's key, when set, names an interface of the list: GKE routes the pod's
    default traffic through it (missing, it is GKE's default, eth0)."""
    value = None if wiring.default_interface is None else wiring.default_interface.value
    if not isinstance(value, str) or any(e.interface_name == value for e in entries):
        return
    listed = counted([shown(entry.interface_name) for entry in entries])
    yield Violation(
        code=Code.DEFAULT_INTERFACE_INVALID,
        field=wiring.default_interface_path(),
        message=f'{DEFAULT_INTERFACE_ANNOTATION} is "{shown(value)}", which names no interface '
        f"of {INTERFACES_ANNOTATION} (it lists {listed}); the pod's default route needs "
        "one of them",
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
    """A bound template's secondary entries (all after eth0): a valid name, and not the pod
    network (AICR's convention: the pod network is eth0's)."""
    for position, entry in enumerate(entries[1:], start=1):
        if not valid_interface_name(entry.interface_name):
            yield _invalid_name(wiring, position, entry)
        if on_pod_network(entry):
            yield Violation(
                code=Code.NETWORK_RESERVED,
                field=wiring.entry_path(position, "network"),
                message=f'{entry.pair()} uses the reserved network "{entry.network}"; '
                "it belongs to eth0, a secondary interface needs a GPU-NIC Network",
            )


def _invalid_names(wiring: Wiring, entries: tuple[InterfaceRef, ...]) -> Iterator[Violation]:
    """Every entry whose name Linux refuses for an interface."""
    for position, entry in enumerate(entries):
        if not valid_interface_name(entry.interface_name):
            yield _invalid_name(wiring, position, entry)


def _invalid_name(wiring: Wiring, position: int, entry: InterfaceRef) -> Violation:
    return Violation(
        code=Code.INTERFACE_NAME_INVALID,
        field=wiring.entry_path(position, "interfaceName"),
        message=f'entry {position} names interface "{shown(entry.interface_name)}", '
        "which is not a valid Linux interface name (1-15 bytes, no whitespace, "
        'control character, "/" or ":", not "." or "..")',
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


def _duplicated_networks(
    wiring: Wiring, entries: tuple[InterfaceRef, ...], networked: Sequence[int]
) -> Iterator[Violation]:
    """A Network named by two of the entries at the ``networked`` positions (told apart by
    position: equal entries are one object, app/domain/annotation.py)."""
    first_seen: dict[str, int] = {}
    for position in networked:
        entry = entries[position]
        if entry.network is None:
            continue
        first = first_seen.setdefault(entry.network, position)
        if first != position:
            yield Violation(
                code=Code.NETWORK_DUPLICATED,
                field=wiring.entry_path(position, "network"),
                message=f"network {shown(entry.network)} is mapped to both "
                f"{shown(entries[first].interface_name)} and {shown(entry.interface_name)}; "
                "each GPU NIC needs its own Network",
            )
