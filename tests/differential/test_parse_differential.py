"""GKE's reading of ``networking.gke.io/interfaces`` against nicguard's (docs/rules.md).

For every generated annotation text, either nicguard refuses it (``parse_interfaces`` raises,
which every rule reports as ``InterfacesAnnotationMalformed``) or it reads exactly the entries
``gke-networking-api``'s ``ParseInterfaceAnnotation`` reads, and GKE reads it without error.

Pinned upstream (tests/oracle/go.mod, go.sum): gke-networking-api v0.2.11 (the newest version
the Go module proxy serves), built with Go 1.26.8 (go.mod's toolchain line; encoding/json's case
folding is the toolchain's). To move a pin: edit the version in tests/oracle/go.mod, run
``go mod tidy`` there, commit go.mod and go.sum; scripts/oracle-bin.sh rebuilds on the next run
(its cache key is the hash of the oracle's sources and go.sum).
"""

from __future__ import annotations

from collections import Counter

from hypothesis import example, given, settings

from app.domain.annotation import AnnotationSyntaxError, parse_interfaces
from tests.differential.corpus import GOOD, annotation_texts
from tests.differential.oracle import Oracle
from tests.support.examples import examples

PRIMARY = '{"interfaceName":"eth0","network":"default"}'


def test_nicguard_reads_the_annotation_as_gke_does_or_refuses_it(oracle: Oracle) -> None:
    seen: Counter[str] = Counter()
    count = examples(2500)

    @settings(max_examples=count)
    @given(annotation_texts())
    # The reproductions of the shadow key, the Kelvin sign and a field given twice.
    @example(
        f'[{PRIMARY},{{"interfaceName":"eth4","network":"gpu-nic-3","Network":"no-such-net"}}]'
    )
    @example(f'[{PRIMARY},{{"interfaceName":"eth4","network":"gpu-nic-3","networ\u212a":"x"}}]')
    @example(f'[{PRIMARY},{{"interfaceName":"eth4","network":"gpu-nic-3","network":"x"}}]')
    @example(f'[{PRIMARY},{{"interfaceName":"eth4","network":"gpu-nic-3","NETWORK":null}}]')
    @example(f'[{PRIMARY},{{"\u0131nterfaceName":"eth9","interfaceName":"eth4","network":"n"}}]')
    @example(f'[{PRIMARY},{{"interfaceName":"eth4","netw\\u006frk":"gpu-nic-3"}}]')
    # Half a surrogate pair: Go decodes it as U+FFFD.
    @example(f'[{PRIMARY},{{"interfaceName":"\\ud800","network":"gpu-\\udfffnic"}}]')
    @example(GOOD)
    def agrees(text: str) -> None:
        gke = oracle.parse(text)
        try:
            ours = parse_interfaces(text)
        except AnnotationSyntaxError:
            seen["refused"] += 1
            return
        read = tuple((e.interface_name, e.network, e.interface) for e in ours)
        assert gke.error is None, f"nicguard reads {read}, GKE fails: {gke.error}\n{text}"
        assert gke.entries == read, f"nicguard reads {read}, GKE reads {gke.entries}\n{text}"
        seen["agreed"] += 1

    agrees()
    print(f"\nparse differential: {dict(seen)}")  # noqa: T201 - the corpus's shape, with -s
    # The corpus is near-valid as often as broken: both sides of the property are exercised.
    assert seen["agreed"] >= count * 12 // 100, seen
    assert seen["refused"] >= count * 12 // 100, seen
