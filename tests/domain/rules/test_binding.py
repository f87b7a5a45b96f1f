"""Recipe -> object leg: ordered, element-wise comparison (app.domain.rules.binding)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, strategies as st

from app.domain.annotation import InterfaceRef, interface_ref
from app.domain.rules.binding import recipe_divergence, recipe_expected
from app.domain.template import NODE_JOB, PodTemplate, job_template
from app.domain.verdict import Code
from app.domain.wiring import Wiring, template_wiring
from tests.builders import INTERFACES_PATH, PAIRS, Pair, runtime, wired

RECORDED = tuple(InterfaceRef(name, net) for name, net in PAIRS)


def _wiring() -> Wiring:
    template = job_template(runtime(annotations=wired()), NODE_JOB)
    assert isinstance(template, PodTemplate)
    return template_wiring(template)


def _refs(pairs: list[Pair]) -> tuple[InterfaceRef, ...]:
    return tuple(InterfaceRef(name, net) for name, net in pairs)


def _swapped(first: int, second: int) -> list[Pair]:
    pairs = list(PAIRS)
    pairs[first], pairs[second] = pairs[second], pairs[first]
    return pairs


def test_an_identical_mapping_does_not_diverge() -> None:
    assert recipe_divergence(_wiring(), RECORDED, recipe_expected(RECORDED, "ns/r@1")) is None


@pytest.mark.parametrize(
    ("secondaries", "field", "fragments", "reordered"),
    [
        pytest.param(
            _refs(_swapped(2, 5)),
            f"{INTERFACES_PATH}[3]",
            ("at position eth3 the object maps eth6->gpu-nic-5", "recipe records eth3->gpu-nic-2"),
            True,
            id="swap-is-a-different-order",
        ),
        pytest.param(
            _refs([(f"eth{i + 1}", net) for i, (_, net) in enumerate(_swapped(0, 1))]),
            f"{INTERFACES_PATH}[1]",
            ("at position eth1 the object maps eth1->gpu-nic-1", "records eth1->gpu-nic-0"),
            False,
            id="networks-swapped-between-names",
        ),
        pytest.param(
            _refs([*PAIRS[:7], ("eth8", "gpu-nic-9")]),
            f"{INTERFACES_PATH}[8]",
            ("at position eth8 the object maps eth8->gpu-nic-9", "records eth8->gpu-nic-7"),
            False,
            id="last-network-differs",
        ),
        pytest.param(
            (*RECORDED[:3], InterfaceRef("eth4", interface="gpu-nic-3"), *RECORDED[4:]),
            f"{INTERFACES_PATH}[4]",
            ("maps eth4->interface:gpu-nic-3", "records eth4->gpu-nic-3"),
            False,
            id="network-interface-never-matches",
        ),
        pytest.param(
            RECORDED[:6],
            INTERFACES_PATH,
            ("maps 6 secondary interfaces but the recipe records 8", "eth7", "eth7->gpu-nic-6"),
            False,
            id="object-shorter",
        ),
        pytest.param(
            (),
            INTERFACES_PATH,
            ("maps 0 secondary interfaces", "at position eth1 the recipe records eth1->gpu-nic-0"),
            False,
            id="object-has-no-secondaries",
        ),
        pytest.param(
            (*RECORDED, InterfaceRef("eth9", "gpu-nic-8")),
            f"{INTERFACES_PATH}[9]",
            ("maps 9 secondary interfaces but the recipe records 8", "eth9 maps eth9->gpu-nic-8"),
            False,
            id="object-longer",
        ),
    ],
)
def test_a_divergence_names_the_first_differing_position_and_both_values(
    secondaries: tuple[InterfaceRef, ...],
    field: str,
    fragments: tuple[str, ...],
    reordered: bool,
) -> None:
    violation = recipe_divergence(_wiring(), secondaries, recipe_expected(RECORDED, "ns/r@1"))
    assert violation is not None
    assert violation.code is Code.MAPPING_DIVERGES_FROM_RECIPE
    assert violation.field == field
    for fragment in fragments:
        assert fragment in violation.message
    assert ("the same pairs appear in a different order" in violation.message) is reordered
    assert violation.message.endswith("(recipe ns/r@1)")


_PAIRS = st.tuples(
    st.sampled_from(["eth1", "eth2", "eth3"]), st.sampled_from(["gpu-nic-0", "gpu-nic-1"])
)


@st.composite
def _mappings(draw: st.DrawFn) -> tuple[list[InterfaceRef], list[InterfaceRef]]:
    """A recorded mapping and an object's: often the same pairs reordered; each entry either
    the interned object or an equal copy."""
    theirs = draw(st.lists(_PAIRS, min_size=1, max_size=6))
    mine = draw(st.one_of(st.permutations(theirs), st.lists(_PAIRS, min_size=1, max_size=6)))

    def entries(pairs: list[Pair]) -> list[InterfaceRef]:
        made = draw(st.lists(st.booleans(), min_size=len(pairs), max_size=len(pairs)))
        return [
            (interface_ref if m else InterfaceRef)(*p) for m, p in zip(made, pairs, strict=True)
        ]

    return entries(list(mine)), entries(theirs)


@given(_mappings())
def test_the_position_and_the_order_note_are_read_by_equality_not_identity(
    mappings: tuple[list[InterfaceRef], list[InterfaceRef]],
) -> None:
    """Entries are compared as values, whether they are one interned object or equal copies."""
    mine, theirs = mappings
    violation = recipe_divergence(_wiring(), tuple(mine), recipe_expected(tuple(theirs), "ns/r@1"))
    if mine == theirs:
        assert violation is None
        return
    assert violation is not None
    position = next(
        (i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
        min(len(mine), len(theirs)),
    )
    assert f"position eth{position + 1}" in violation.message
    reordered = position < min(len(mine), len(theirs)) and Counter(mine) == Counter(theirs)
    assert ("the same pairs appear in a different order" in violation.message) is reordered
