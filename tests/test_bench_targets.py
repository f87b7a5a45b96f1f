"""The bars `make bench` holds nicguard to (bench.run): SPEC §10's, and the stricter ones an allow
meets against the same-stack echo."""

from __future__ import annotations

import pytest

from bench.run import CONCURRENT, SINGLE, Comparison, Load, targets

_SIXTEEN = Load(threads=2, connections=16, seconds=10)
_ONE = Load(threads=1, connections=1, seconds=10)


def _bars(review: str, load: Load, servers: tuple[str, ...]) -> list[str]:
    return [f"{t.baseline} {t.described()}" for t in targets(Comparison(review, load, servers))]


@pytest.mark.parametrize("review", ["good-runtime", "served-pod"])
def test_an_allow_meets_085_of_the_same_stack_echo_with_a_p99_within_125(review: str) -> None:
    assert _bars(review, _SIXTEEN, CONCURRENT) == [
        "echo-default throughput >= 1.50x",
        "echo-default p99 <= 1.00x",
        "echo throughput >= 0.85x",
        "echo p99 <= 1.25x",
    ]


def test_a_denial_meets_spec_bars_080_and_15() -> None:
    assert _bars("drifted-runtime", _SIXTEEN, CONCURRENT) == [
        "echo-default throughput >= 1.50x",
        "echo-default p99 <= 1.00x",
        "echo throughput >= 0.80x",
        "echo p99 <= 1.50x",
    ]


@pytest.mark.parametrize("review", ["drifted-runtime", "good-runtime", "served-pod"])
def test_one_connection_is_held_to_the_go_echos_p50(review: str) -> None:
    assert _bars(review, _ONE, SINGLE) == ["go-echo p50 <= 2.50x"]
