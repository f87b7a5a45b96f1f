"""Cluster states of any size and shape for the scale benchmarks: how many Networks (each with its
GKENetworkParamSet), runtimes (wired alike or each its own way, or by DRA claims) and
ResourceClaimTemplates, in which file layout.

Runtimes are copies of AICR's ``torch-distributed-tcpxo`` (``bench.state``). "Varied" wiring gives
every runtime its own mapping over the existing Networks: no two share a tuple of names, an
annotation string or a spec, which is what defeats sharing.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from app.domain.policy import PROFILE_LABEL
from bench.state import (
    EXAMPLES,
    NAMESPACES,
    generated_claim_templates,
    generated_networks,
    generated_runtimes,
    load_one,
)

INTERFACES: Final = "networking.gke.io/interfaces"
_PER_FILE: Final = 1_000
_NICS: Final = 8


class Layout(StrEnum):
    FILES = "YAML streams of 1,000 objects"
    STREAM = "one YAML stream"
    JSON_LIST = "one JSON List"


@dataclass(frozen=True, slots=True)
class Shape:
    """``networks`` Networks and as many param sets, ``runtimes`` runtimes, ``templates``
    ResourceClaimTemplates (with any, the runtimes are wired by claiming them instead)."""

    networks: int
    runtimes: int
    varied: bool
    layout: Layout
    templates: int = 0

    @property
    def objects(self) -> int:
        return 2 * self.networks + self.runtimes + self.templates

    def scaled(self, factor: int) -> Shape:
        return Shape(
            self.networks * factor,
            self.runtimes * factor,
            self.varied,
            self.layout,
            self.templates * factor,
        )

    def describe(self) -> str:
        wiring = "each wired its own way" if self.varied else "one wiring"
        if self.templates:
            wiring = "each claiming one of the templates"
        parts = [f"{self.networks:,} Networks + {self.networks:,} param sets"]
        if self.runtimes:
            parts.append(f"{self.runtimes:,} runtimes ({wiring})")
        if self.templates:
            parts.append(f"{self.templates:,} ResourceClaimTemplates")
        return f"{' + '.join(parts)}, {self.layout.value}"


# The DRA mix of 10,000 cached objects: runtimes wired by claiming the templates.
DRA_MIX: Final = Shape(1_000, 5_000, varied=False, layout=Layout.JSON_LIST, templates=3_000)


def write_shape(shape: Shape, target: Path) -> None:
    """The state of ``shape`` under ``target`` (created)."""
    target.mkdir(parents=True, exist_ok=True)
    objects = itertools.chain(
        generated_networks(shape.networks),
        _runtimes(shape.runtimes, shape.networks, varied=shape.varied, templates=shape.templates),
        generated_claim_templates(shape.templates),
    )
    if shape.layout is Layout.JSON_LIST:
        _write_list(target / "state.json", objects)
    elif shape.layout is Layout.STREAM:
        _write_stream(target / "state.yaml", objects)
    else:
        for part, chunk in enumerate(_chunks(objects, _PER_FILE)):
            _write_stream(target / f"state-{part:03d}.yaml", chunk)


def _runtimes(
    count: int, networks: int, *, varied: bool, templates: int
) -> Iterator[dict[str, object]]:
    template = load_one(EXAMPLES / "cluster" / "torch-distributed-tcpxo.yaml")
    wired = wired_runtimes(generated_runtimes(template, count), 0, networks, varied=varied)
    yield from wired if not templates else claiming_runtimes(wired, 0, templates)


def claiming_runtimes(
    runtimes: Iterable[dict[str, object]], first: int, templates: int
) -> Iterator[dict[str, object]]:
    """``runtimes`` (numbered from ``first``) wired by DRA instead: bound to ``a4-dranet`` by
    label, no interfaces annotation, their node pods claiming one of the first ``templates``
    generated templates, in their own namespace (runtime ``n`` claims template ``n`` modulo the
    largest multiple of the namespaces that ``templates`` holds)."""
    spread = templates - templates % NAMESPACES
    for number, runtime in enumerate(runtimes, start=first):
        runtime["metadata"]["labels"][PROFILE_LABEL] = "a4-dranet"  # type: ignore[index]
        pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]  # type: ignore[index]
        del pod["template"]["metadata"]["annotations"][INTERFACES]
        pod["template"]["spec"]["resourceClaims"] = [
            {"name": "rdma", "resourceClaimTemplateName": f"rdma-{number % spread:05d}"}
        ]
        yield runtime


def wired_runtimes(
    runtimes: Iterable[dict[str, object]], first: int, networks: int, *, varied: bool
) -> Iterator[dict[str, object]]:
    """``runtimes`` (numbered from ``first``) wired to the generated Networks ``bench-net-*``."""
    for number, runtime in enumerate(runtimes, start=first):
        pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]  # type: ignore[index]
        annotations = pod["template"]["metadata"]["annotations"]
        entries = json.loads(annotations[INTERFACES])
        for nic, entry in enumerate(entries[1:], start=1):
            entry["network"] = f"bench-net-{_network(number, nic, networks, varied=varied):05d}"
        annotations[INTERFACES] = json.dumps(entries)
        yield runtime


def _network(runtime: int, nic: int, networks: int, *, varied: bool) -> int:
    """Which generated Network backs ``eth<nic>``: the first eight for every runtime, or a
    mapping of its own (a start and a stride that no other runtime has, eight distinct Networks
    while ``networks * networks / 8`` exceeds the runtimes)."""
    if not varied:
        return (nic - 1) % networks
    stride = 1 + runtime // networks
    return (runtime + nic * stride) % networks


def _chunks(objects: Iterable[dict[str, object]], size: int) -> Iterator[list[dict[str, object]]]:
    iterator = iter(objects)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _write_stream(path: Path, objects: Iterable[dict[str, object]]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for position, obj in enumerate(objects):
            out.write(("---\n" if position else "") + json.dumps(obj, separators=(",", ":")) + "\n")


def _write_list(path: Path, objects: Iterable[dict[str, object]]) -> None:
    # As kubectl get -o json writes it: keys sorted, so the items come before the kind.
    with path.open("w", encoding="utf-8") as out:
        out.write('{"apiVersion":"v1","items":[')
        for position, obj in enumerate(objects):
            out.write(("," if position else "") + json.dumps(obj, separators=(",", ":")))
        out.write('],"kind":"List","metadata":{"resourceVersion":""}}\n')
