"""The continuous audit's core: standings, what a change affects, and the counts a DriftBook keeps.

(app.domain.drift.) Standings come from the real rules: a runtime wired to Networks that exist
and are Ready passes; a NotReady one fails (or warns under ``not-ready=warn``); a recipe that
moves away fails the recipe-bound runtimes.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from app.domain.cluster import ClusterSnapshot, RuntimeKey, Unverifiable
from app.domain.drift import (
    EVERYTHING,
    PASSING,
    Change,
    DriftBook,
    Result,
    Standing,
    Transition,
    complete,
    judge,
    named_claim_templates,
    named_networks,
    standing_of,
)
from app.domain.evaluate import evaluate
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.policy import NotReady, Placement, Policy
from app.domain.review import Operation, Review
from app.domain.verdict import Code, Verdict, Violation
from tests.builders import (
    GPU_NICS,
    INTERFACES,
    PAIRS,
    RECIPE_BOUND,
    TCPXO_RUNTIME,
    Pair,
    bound,
    by_template,
    claim_template,
    claimed_job,
    dra_runtime,
    mpi_runtime,
    network,
    node_job,
    plain_recipe,
    runtime,
    snapshot,
    wired,
)
from tests.support.examples import examples

CTR = Kind.CLUSTER_TRAINING_RUNTIME
TR = Kind.TRAINING_RUNTIME
NETS = ("net-a", "net-b", "net-c")
REVERSED = tuple(reversed(PAIRS))
RENUMBERED = tuple((f"eth{i}", net) for i, (_, net) in enumerate(REVERSED, start=1))
"""eth1 -> gpu-nic-7 ... eth8 -> gpu-nic-0: every Network on another interface."""
WARN_ONLY = Policy(not_ready=NotReady.WARN)


def ctr(name: str) -> RuntimeKey:
    return (CTR, "", name)


def tr(name: str) -> RuntimeKey:
    return (TR, "team", name)


def pairs_for(networks: Sequence[str]) -> list[Pair]:
    return [(f"eth{i}", net) for i, net in enumerate(networks, start=1)]


def naming(name: str, *networks: str, kind: Kind = CTR) -> dict[str, object]:
    """A runtime whose node job is wired to ``networks`` (unwired when there are none)."""
    if not networks:
        return runtime(name, kind=kind)
    return runtime(name, kind=kind, annotations=wired(pairs_for(networks)))


def cluster(
    *runtimes: object,
    down: Iterable[str] = (),
    networks: Iterable[str] = (*NETS, *GPU_NICS),
    recipe: Iterable[Pair] = PAIRS,
) -> ClusterSnapshot:
    """Usable ``networks`` but ``down`` (Ready False), the recipe of ``recipe``, ``runtimes``."""
    unready = [network(name, ready=False) for name in down]
    return snapshot(*unready, *runtimes, networks=networks, recipe=plain_recipe(recipe))


def runtimes_of(view: ClusterSnapshot) -> Mapping[RuntimeKey, JsonMap]:
    assert not isinstance(view.runtime_state, Unverifiable)
    return view.runtime_state


def applied(book: DriftBook, change: Change, view: ClusterSnapshot) -> list[Transition]:
    found = book.apply(change, view)
    assert isinstance(found, list)
    return found


def primed(view: ClusterSnapshot, policy: Policy | None = None) -> DriftBook:
    book = DriftBook(policy or Policy())
    applied(book, EVERYTHING, view)
    return book


def from_scratch(view: ClusterSnapshot, policy: Policy) -> dict[RuntimeKey, Standing]:
    return {key: judge(key, rt, view, policy) for key, rt in runtimes_of(view).items()}


def counted_results(book: DriftBook) -> Counter[Result]:
    return Counter(s.result for s in book.standings.values())


def counted_codes(book: DriftBook) -> Counter[Code]:
    return Counter(
        code for s in book.standings.values() if s.result is Result.FAIL for code in s.codes
    )


def _v(code: Code, field: str = "f", message: str = "m") -> Violation:
    return Violation(code=code, field=field, message=message)


# -- Standing, standing_of ---------------------------------------------------------------------


def test_a_standing_lists_each_code_once_in_finding_order_and_renders_each_finding() -> None:
    standing = Standing(
        Result.FAIL,
        (
            _v(Code.NETWORK_NOT_READY, message="one"),
            _v(Code.NETWORK_NOT_FOUND, message="two"),
            _v(Code.NETWORK_NOT_READY, message="three"),
        ),
    )
    assert standing.codes == (Code.NETWORK_NOT_READY, Code.NETWORK_NOT_FOUND)
    assert standing.lines() == (
        "[NetworkNotReady] one",
        "[NetworkNotFound] two",
        "[NetworkNotReady] three",
    )


def test_passing_has_no_findings_codes_lines_or_fingerprint() -> None:
    assert Standing(Result.PASS) == PASSING
    assert (PASSING.codes, PASSING.lines(), PASSING.fingerprint) == ((), (), "")


def test_the_fingerprint_is_stable_across_processes() -> None:
    # sha256 of the sorted "code<TAB>field" lines, not hash(): pinned so it never silently moves.
    standing = Standing(Result.FAIL, (_v(Code.NETWORK_NOT_FOUND, "spec.x", "gone"),))
    assert standing.fingerprint == hashlib.sha256(b"NetworkNotFound\tspec.x").hexdigest()[:16]
    assert standing.fingerprint == "cd62b951ed485519"


BASE = (_v(Code.NETWORK_NOT_FOUND, "spec.x", "gone"), _v(Code.NETWORK_NOT_READY, "spec.y", "down"))


@pytest.mark.parametrize(
    ("other", "same"),
    [
        pytest.param(Standing(Result.FAIL, BASE), True, id="equal-findings"),
        pytest.param(Standing(Result.WARN, BASE), True, id="result-is-not-part-of-it"),
        pytest.param(
            Standing(Result.FAIL, (replace(BASE[0], causes=(("a", "b"),)), BASE[1])),
            False,
            id="what-the-causes-name-is-part-of-it",
        ),
        pytest.param(
            Standing(Result.FAIL, (replace(BASE[0], code=Code.NETWORK_RESERVED), BASE[1])),
            False,
            id="other-code",
        ),
        pytest.param(
            Standing(Result.FAIL, (replace(BASE[0], field="spec.z"), BASE[1])),
            False,
            id="other-field",
        ),
        pytest.param(
            Standing(Result.FAIL, (replace(BASE[0], message="went"), BASE[1])),
            True,
            id="wording-is-not-part-of-it",
        ),
        pytest.param(Standing(Result.FAIL, BASE[::-1]), True, id="order-is-not-part-of-it"),
        pytest.param(Standing(Result.FAIL, BASE[:1]), False, id="fewer-findings"),
        pytest.param(PASSING, False, id="no-findings"),
    ],
)
def test_equal_findings_have_equal_fingerprints_and_any_other_finding_set_another(
    other: Standing, same: bool
) -> None:
    fingerprint = Standing(Result.FAIL, BASE).fingerprint
    assert len(fingerprint) == 16
    assert int(fingerprint, 16) >= 0
    assert (other.fingerprint == fingerprint) is same


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        pytest.param(Verdict(), PASSING, id="allowed"),
        pytest.param(Verdict(warnings=("a note",)), PASSING, id="notes-are-not-findings"),
        pytest.param(Verdict(violations=BASE), Standing(Result.FAIL, BASE), id="violations-fail"),
        pytest.param(
            Verdict(waived=BASE), Standing(Result.WARN, BASE), id="only-waived-findings-warn"
        ),
        pytest.param(
            Verdict(violations=BASE[:1], waived=BASE[1:]),
            Standing(Result.FAIL, BASE[:1]),
            id="violations-hide-the-waived",
        ),
        pytest.param(
            Verdict(warned=BASE, waived=BASE[1:]),
            Standing(Result.FAIL, BASE),
            id="enforcement-warn-still-fails",
        ),
    ],
)
def test_a_verdict_becomes_a_standing(verdict: Verdict, expected: Standing) -> None:
    assert standing_of(verdict) == expected


# -- judge -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "obj", "view", "policy", "result", "codes"),
    [
        pytest.param(
            ctr("a"), naming("a", "net-a"), cluster(), Policy(), Result.PASS, (), id="ready"
        ),
        pytest.param(
            ctr("a"),
            naming("a", "net-a"),
            cluster(down=["net-a"]),
            Policy(),
            Result.FAIL,
            (Code.NETWORK_NOT_READY,),
            id="not-ready-fails",
        ),
        pytest.param(
            ctr("a"),
            naming("a", "net-a"),
            cluster(down=["net-a"]),
            WARN_ONLY,
            Result.WARN,
            (Code.NETWORK_NOT_READY,),
            id="not-ready-warns-under-warn",
        ),
        pytest.param(
            ctr("a"),
            naming("a", "net-gone"),
            cluster(),
            WARN_ONLY,
            Result.FAIL,
            (Code.NETWORK_NOT_FOUND,),
            id="missing-network-fails-even-under-warn",
        ),
        pytest.param(
            ctr(TCPXO_RUNTIME),
            runtime(annotations=wired(PAIRS)),
            cluster(),
            Policy(),
            Result.PASS,
            (),
            id="recipe-bound-as-recorded",
        ),
        pytest.param(
            ctr(TCPXO_RUNTIME),
            runtime(annotations=wired(PAIRS)),
            cluster(recipe=REVERSED),
            Policy(),
            Result.FAIL,
            (Code.MAPPING_DIVERGES_FROM_RECIPE,),
            id="recipe-bound-diverging",
        ),
        pytest.param(
            ctr(TCPXO_RUNTIME),
            runtime(),
            cluster(),
            Policy(),
            Result.FAIL,
            (Code.INTERFACES_ANNOTATION_MISSING,),
            id="ctr-bound-by-the-key-name",
        ),
        pytest.param(
            tr(TCPXO_RUNTIME),
            runtime(kind=TR),
            cluster(),
            Policy(),
            Result.PASS,
            (),
            id="a-tr-is-never-bound-by-name",
        ),
    ],
)
def test_judge_applies_every_rule_with_the_admission_settings(
    key: RuntimeKey,
    obj: JsonMap,
    view: ClusterSnapshot,
    policy: Policy,
    result: Result,
    codes: tuple[Code, ...],
) -> None:
    standing = judge(key, obj, view, policy)
    assert (standing.result, standing.codes) == (result, codes)
    kind, namespace, name = key
    as_create = Review(
        operation=Operation.CREATE, kind=kind, namespace=namespace, obj=obj, name=name
    )
    assert standing == standing_of(evaluate(as_create, view, policy))


def test_judge_is_a_create_so_nothing_is_grandfathered() -> None:
    # The same runtime as an UPDATE of itself would have its NotReady finding waived.
    obj = naming("a", "net-a")
    view = cluster(down=["net-a"])
    update = Review(operation=Operation.UPDATE, kind=CTR, obj=obj, old_obj=obj, name="a")
    assert evaluate(update, view, Policy()).violations == ()
    assert judge(ctr("a"), obj, view, Policy()).result is Result.FAIL


# -- named_networks ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(naming("a", "net-a", "net-b"), {"default", "net-a", "net-b"}, id="wired"),
        pytest.param(runtime(annotations=wired(PAIRS)), {"default", *GPU_NICS}, id="eight-nics"),
        pytest.param(runtime("a"), set(), id="unwired"),
        pytest.param(runtime("a", annotations={INTERFACES: 7}), set(), id="not-a-string"),
        pytest.param(runtime("a", annotations={INTERFACES: "[{"}), set(), id="not-json"),
        pytest.param(
            runtime("a", annotations={INTERFACES: '[{"interfaceName": "eth1"}]'}),
            set(),
            id="entry-without-target",
        ),
        pytest.param(
            runtime(
                "a",
                annotations={
                    INTERFACES: json.dumps(
                        [
                            {"interfaceName": "eth0", "network": "default"},
                            {"interfaceName": "eth1", "interface": "nic-object"},
                            {"interfaceName": "eth2", "network": "net-b"},
                        ]
                    )
                },
            ),
            {"default", "net-b"},
            id="network-interface-references-name-no-network",
        ),
        pytest.param(
            runtime("a", jobs=[{"name": "node", "template": {}}]), set(), id="no-pod-template"
        ),
        pytest.param(
            mpi_runtime(
                "m", launcher=wired(pairs_for(["net-a"])), node=wired(pairs_for(["net-b"]))
            ),
            {"default", "net-a", "net-b"},
            id="launcher-as-node-and-node",
        ),
        pytest.param(
            mpi_runtime(
                "m",
                launcher=wired(pairs_for(["net-a"])),
                node=wired(pairs_for(["net-b"])),
                launcher_as_node=False,
            ),
            {"default", "net-a", "net-b"},
            id="launcher-not-a-node-is-annotated",
        ),
        pytest.param(
            runtime("a", jobs=[node_job(wired(pairs_for(["net-b"])), name="trainer")]),
            {"default", "net-b"},
            id="no-node-job-annotated-trainer",
        ),
        pytest.param(
            runtime(
                "a",
                jobs=[
                    node_job(wired(pairs_for(["net-a"]))),
                    node_job(wired(pairs_for(["net-c"])), name="evaluator"),
                    node_job({"note": "x"}, name="data"),
                ],
            ),
            {"default", "net-a", "net-c"},
            id="annotated-evaluator",
        ),
    ],
)
def test_named_networks_are_those_the_wired_and_annotated_templates_name(
    obj: JsonMap, expected: set[str]
) -> None:
    assert named_networks(obj) == tuple(sorted(set(expected)))


# -- Change ------------------------------------------------------------------------------------

A, B = ctr("a"), ctr("b")


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        pytest.param(Change(), Change(), Change(), id="nothing"),
        pytest.param(
            Change(runtimes=frozenset({A}), networks=frozenset({"net-a"})),
            Change(runtimes=frozenset({B}), networks=frozenset({"net-a", "net-b"})),
            Change(runtimes=frozenset({A, B}), networks=frozenset({"net-a", "net-b"})),
            id="sets-unite",
        ),
        pytest.param(Change(recipe=True), Change(), Change(recipe=True), id="recipe-left"),
        pytest.param(Change(), Change(recipe=True), Change(recipe=True), id="recipe-right"),
        pytest.param(
            Change(runtimes=frozenset({A})),
            EVERYTHING,
            Change(runtimes=frozenset({A}), everything=True),
            id="everything-right",
        ),
        pytest.param(EVERYTHING, Change(), EVERYTHING, id="everything-left"),
        pytest.param(
            Change(claim_templates=frozenset({("team", "a")})),
            Change(claim_templates=frozenset({("team", "b")}), recipe=True),
            Change(claim_templates=frozenset({("team", "a"), ("team", "b")}), recipe=True),
            id="claim-templates-unite",
        ),
    ],
)
def test_changes_accumulate_with_or(left: Change, right: Change, expected: Change) -> None:
    assert left | right == expected
    assert right | left == expected


@pytest.mark.parametrize(
    ("change", "truth"),
    [
        pytest.param(Change(), False, id="nothing"),
        pytest.param(Change(runtimes=frozenset({A})), True, id="a-runtime"),
        pytest.param(Change(networks=frozenset({"net-a"})), True, id="a-network"),
        pytest.param(Change(recipe=True), True, id="the-recipe"),
        pytest.param(Change(claim_templates=frozenset({("t", "n")})), True, id="a-claim-template"),
        pytest.param(EVERYTHING, True, id="everything"),
    ],
)
def test_a_change_is_true_when_it_names_anything(change: Change, truth: bool) -> None:
    assert bool(change) is truth


def test_everything_is_only_the_everything_flag() -> None:
    assert Change(everything=True) == EVERYTHING


# -- complete ----------------------------------------------------------------------------------

LOST = Unverifiable("cache lost")


PARTS = ("network_state", "recipe_state", "runtime_state", "claim_template_state")


def _lost(part: str) -> dict[str, Any]:
    """One part of a view unknown (the parts differ in type: mypy cannot follow a name)."""
    return {part: LOST}


@pytest.mark.parametrize("part", PARTS)
def test_a_view_with_an_unknown_part_is_not_complete(part: str) -> None:
    assert complete(replace(cluster(naming("a")), **_lost(part))) is LOST


def test_a_complete_view_gives_its_runtimes() -> None:
    view = cluster(naming("a"), naming("t", kind=TR))
    assert complete(view) is view.runtime_state
    assert set(runtimes_of(view)) == {ctr("a"), tr("t")}


# -- DriftBook: first pass, networks -----------------------------------------------------------

ONE = naming("a", "net-a")
TWO = naming("b", "net-b")
BOTH = naming("ab", "net-a", "net-b")
PLAIN = naming("plain")
THIRD = naming("t", "net-c", kind=TR)
FIVE = (ONE, TWO, BOTH, PLAIN, THIRD)


def test_everything_on_an_empty_book_judges_every_runtime_in_key_order() -> None:
    view = cluster(*FIVE, down=["net-c"])
    book = DriftBook(Policy())
    transitions = applied(book, EVERYTHING, view)
    expected = from_scratch(view, Policy())
    assert [t.key for t in transitions] == [ctr("a"), ctr("ab"), ctr("b"), ctr("plain"), tr("t")]
    assert transitions == [Transition(k, None, expected[k]) for k in sorted(expected)]
    assert book.standings == expected
    assert book.standings[tr("t")].codes == (Code.NETWORK_NOT_READY,)
    assert book.results == Counter({Result.PASS: 4, Result.FAIL: 1})
    assert book.failing_codes == Counter({Code.NETWORK_NOT_READY: 1})


@pytest.mark.parametrize(
    ("flipped", "policy", "keys", "result"),
    [
        pytest.param("net-a", Policy(), [ctr("a"), ctr("ab")], Result.FAIL, id="net-a"),
        pytest.param("net-a", WARN_ONLY, [ctr("a"), ctr("ab")], Result.WARN, id="net-a-warn"),
        pytest.param("net-b", Policy(), [ctr("ab"), ctr("b")], Result.FAIL, id="net-b"),
        pytest.param("net-c", Policy(), [tr("t")], Result.FAIL, id="net-c"),
        pytest.param("gpu-nic-0", Policy(), [], Result.FAIL, id="named-by-none"),
    ],
)
def test_a_network_flip_rejudges_only_the_runtimes_naming_it(
    flipped: str, policy: Policy, keys: list[RuntimeKey], result: Result
) -> None:
    book = primed(cluster(*FIVE), policy)
    view = cluster(*FIVE, down=[flipped])
    change = Change(networks=frozenset({flipped}))
    assert book.affected(change, runtimes_of(view)) == set(keys)
    transitions = applied(book, change, view)
    assert [(t.key, t.before) for t in transitions] == [(key, PASSING) for key in keys]
    for transition in transitions:
        assert transition.after is not None
        assert (transition.after.result, transition.after.codes) == (
            result,
            (Code.NETWORK_NOT_READY,),
        )
        assert book.standings[transition.key] == transition.after
    assert book.standings == from_scratch(view, policy)
    assert book.results == Counter({Result.PASS: 5 - len(keys), result: len(keys)})
    failing = len(keys) if result is Result.FAIL else 0
    assert book.failing_codes == Counter({Code.NETWORK_NOT_READY: failing})


def test_a_network_an_annotated_job_names_rejudges_its_runtime() -> None:
    """The evaluator, not the wired node, names net-c: its NotReady fails the runtime, and the
    audit (cache slims the runtime) finds it from the Network's change alone."""
    evaluating = runtime(
        "eval",
        jobs=[
            node_job(wired(pairs_for(["net-a"]))),
            node_job(wired(pairs_for(["net-c"])), name="evaluator"),
        ],
    )
    book = primed(cluster(evaluating))
    view = cluster(evaluating, down=["net-c"])
    change = Change(networks=frozenset({"net-c"}))
    assert book.affected(change, runtimes_of(view)) == {ctr("eval")}
    (transition,) = applied(book, change, view)
    assert transition.after is not None
    assert transition.after.codes == (Code.NETWORK_NOT_READY,)
    assert transition.after.findings[0].message.startswith("evaluator job: ")


def test_a_network_change_leaves_runtimes_naming_other_networks_as_they_stood() -> None:
    book = primed(cluster(*FIVE))
    view = cluster(*FIVE, down=["net-a", "net-b"])
    transitions = applied(book, Change(networks=frozenset({"net-a"})), view)
    assert [t.key for t in transitions] == [ctr("a"), ctr("ab")]
    assert book.standings[ctr("b")] == PASSING  # net-b is down too, but no change named it
    assert judge(ctr("b"), runtimes_of(view)[ctr("b")], view, Policy()).result is Result.FAIL

    transitions = applied(book, Change(networks=frozenset({"net-b"})), view)
    # ab was judged against this view already: judged again, it says the same, so only b moves.
    assert [t.key for t in transitions] == [ctr("b")]
    assert book.standings == from_scratch(view, Policy())
    assert book.results == Counter({Result.PASS: 2, Result.FAIL: 3})


def test_a_network_back_to_ready_restores_the_counts() -> None:
    healthy = cluster(*FIVE)
    book = primed(healthy)
    flipped = Change(networks=frozenset({"net-a"}))
    failing = applied(book, flipped, cluster(*FIVE, down=["net-a"]))
    restored = applied(book, flipped, healthy)
    assert [(t.key, t.before, t.after) for t in restored] == [
        (t.key, t.after, PASSING) for t in failing
    ]
    assert book.standings == from_scratch(healthy, Policy())
    assert book.results == Counter({Result.PASS: 5})
    assert book.failing_codes == Counter()
    assert all(count == 0 for count in book.failing_codes.values())


def test_rejudging_an_unchanged_view_reports_nothing_and_keeps_the_counts() -> None:
    view = cluster(*FIVE, down=["net-a"])
    book = primed(view)
    results, codes = Counter(book.results), Counter(book.failing_codes)
    assert applied(book, EVERYTHING, view) == []
    assert (book.results, book.failing_codes) == (results, codes)


def test_a_failing_code_counts_once_per_runtime_however_often_it_is_found() -> None:
    twice = mpi_runtime("m", launcher=wired(pairs_for(["net-a"])), node=wired(pairs_for(["net-a"])))
    both = naming("nf", "net-a", "net-gone")
    book = primed(cluster(twice, both, down=["net-a"]))
    assert len(book.standings[ctr("m")].findings) == 2
    assert book.standings[ctr("nf")].codes == (Code.NETWORK_NOT_FOUND, Code.NETWORK_NOT_READY)
    assert book.results == Counter({Result.FAIL: 2})
    assert book.failing_codes == Counter({Code.NETWORK_NOT_READY: 2, Code.NETWORK_NOT_FOUND: 1})


# -- DriftBook: the recipe ---------------------------------------------------------------------

RECIPE_RUNTIMES = (
    runtime(annotations=wired(PAIRS)),
    bound("custom", annotations=wired(PAIRS)),
    runtime("mine", annotations=wired(PAIRS)),
    runtime(kind=TR, annotations=wired(PAIRS)),
    runtime("tr-bound", kind=TR, labels={RECIPE_BOUND: "true"}, annotations=wired(PAIRS)),
    runtime("not-bound", labels={RECIPE_BOUND: "false"}, annotations=wired(PAIRS)),
    ONE,
)


@pytest.mark.parametrize(
    ("policy", "keys"),
    [
        pytest.param(
            Policy(), [ctr("custom"), ctr(TCPXO_RUNTIME), tr("tr-bound")], id="default-names"
        ),
        pytest.param(
            Policy(recipe_runtimes=frozenset({"mine"})),
            [ctr("custom"), ctr("mine"), tr("tr-bound")],
            id="named-in-the-setting",
        ),
        pytest.param(
            Policy(recipe_runtimes=frozenset({"mine", TCPXO_RUNTIME}), not_ready=NotReady.WARN),
            [ctr("custom"), ctr("mine"), ctr(TCPXO_RUNTIME), tr("tr-bound")],
            id="several-names",
        ),
    ],
)
def test_a_recipe_change_rejudges_the_bound_runtimes_and_those_it_places(
    policy: Policy, keys: list[RuntimeKey]
) -> None:
    book = primed(cluster(*RECIPE_RUNTIMES), policy)
    assert book.results == Counter({Result.PASS: len(RECIPE_RUNTIMES)})
    view = cluster(*RECIPE_RUNTIMES, recipe=RENUMBERED)
    # Every other runtime naming the recipe's Networks is placed by it (ONE names none of them).
    placed = sorted(set(runtimes_of(view)) - set(keys) - {ctr("a")})
    everyone = sorted([*keys, *placed])
    assert book.affected(Change(recipe=True), runtimes_of(view)) == set(everyone)
    assert book.affected(Change(), runtimes_of(view)) == set()
    transitions = applied(book, Change(recipe=True), view)
    assert [t.key for t in transitions] == everyone
    for transition in transitions:
        assert transition.before == PASSING
        assert transition.after is not None
        expected = (
            Code.MAPPING_DIVERGES_FROM_RECIPE if transition.key in keys else Code.NETWORK_MISPLACED
        )
        assert transition.after.codes == (expected,)
    assert book.standings == from_scratch(view, policy)
    assert book.failing_codes == Counter(
        {Code.MAPPING_DIVERGES_FROM_RECIPE: len(keys), Code.NETWORK_MISPLACED: len(placed)}
    )


def test_a_recipe_placing_other_networks_rejudges_those_of_the_old_and_the_new() -> None:
    vpc = runtime("vpc", annotations=wired([("eth2", "vpc1")]))
    gpu = runtime("gpu", annotations=wired([("eth2", "gpu-nic-0")]))
    other = runtime("other", annotations=wired([("eth1", "net-a")]))
    networks = (*NETS, *GPU_NICS, "vpc1")
    book = primed(cluster(vpc, gpu, other, networks=networks))
    assert book.standings[ctr("gpu")].codes == (Code.NETWORK_MISPLACED,)
    moved = snapshot(
        vpc,
        gpu,
        other,
        networks=networks,
        recipe={"interfaces": '[{"interfaceName": "eth1", "network": "vpc1"}]'},
    )
    # The old recipe placed gpu-nic-0 (now free), the new one places vpc1 (now misplaced).
    assert book.affected(Change(recipe=True), runtimes_of(moved), moved.recipe()) == {
        ctr("gpu"),
        ctr("vpc"),
    }
    transitions = applied(book, Change(recipe=True), moved)
    assert [(t.key, t.after) for t in transitions] == [
        (ctr("gpu"), PASSING),
        (ctr("vpc"), book.standings[ctr("vpc")]),
    ]
    assert book.standings[ctr("vpc")].codes == (Code.NETWORK_MISPLACED,)
    # Taken in: the next recipe change starts from vpc1.
    assert book.affected(Change(recipe=True), runtimes_of(moved)) == {ctr("vpc")}


def test_under_placement_off_a_recipe_change_places_nothing() -> None:
    team = runtime("team", annotations=wired([("eth2", "gpu-nic-0")]))
    book = primed(cluster(team), Policy(placement=Placement.OFF))
    view = cluster(team, recipe=REVERSED)
    assert book.affected(Change(recipe=True), runtimes_of(view), view.recipe()) == set()


def test_a_network_change_does_not_rejudge_the_recipe_bound_ones() -> None:
    book = primed(cluster(*RECIPE_RUNTIMES))
    view = cluster(*RECIPE_RUNTIMES, recipe=REVERSED)
    assert applied(book, Change(networks=frozenset({"net-a"})), view) == []
    assert book.results == Counter({Result.PASS: len(RECIPE_RUNTIMES)})


# -- DriftBook: runtimes changing, going, everything -------------------------------------------


def test_a_runtime_change_moves_it_in_the_network_index() -> None:
    book = primed(cluster(ONE, BOTH, down=["net-a"]))
    moved = naming("a", "net-b")
    view = cluster(moved, BOTH, down=["net-a"])
    by_a, by_b = Change(networks=frozenset({"net-a"})), Change(networks=frozenset({"net-b"}))
    # ``a`` fails NotReady, whose message lists the usable Networks: any Network change counts.
    assert book.affected(by_b, runtimes_of(view)) == {ctr("a"), ctr("ab")}

    transitions = applied(book, Change(runtimes=frozenset({ctr("a")})), view)
    assert [(t.key, t.after) for t in transitions] == [(ctr("a"), PASSING)]
    assert book.affected(by_a, runtimes_of(view)) == {ctr("ab")}
    assert book.affected(by_b, runtimes_of(view)) == {ctr("a"), ctr("ab")}
    assert book.results == Counter({Result.PASS: 1, Result.FAIL: 1})
    assert book.failing_codes == Counter({Code.NETWORK_NOT_READY: 1})


def test_a_runtime_change_moves_it_in_and_out_of_the_recipe_bound_set() -> None:
    book = primed(cluster(ONE))
    assert book.affected(Change(recipe=True), {}) == set()
    labelled = runtime("a", labels={RECIPE_BOUND: "true"}, annotations=wired(pairs_for(["net-a"])))
    change = Change(runtimes=frozenset({ctr("a")}))
    transitions = applied(book, change, cluster(labelled))
    assert [t.key for t in transitions] == [ctr("a")]
    assert transitions[0].after is not None
    assert transitions[0].after.codes == (Code.MAPPING_DIVERGES_FROM_RECIPE,)
    assert book.affected(Change(recipe=True), {}) == {ctr("a")}

    assert applied(book, change, cluster(ONE)) == [
        Transition(ctr("a"), transitions[0].after, PASSING)
    ]
    assert book.affected(Change(recipe=True), {}) == set()


def test_a_gone_runtime_leaves_the_standings_the_counts_and_the_indexes() -> None:
    view = cluster(ONE, BOTH, down=["net-a"])
    book = primed(view)
    before = book.standings[ctr("a")]
    gone = cluster(BOTH, down=["net-a"])
    change = Change(runtimes=frozenset({ctr("a")}))
    assert book.affected(change, runtimes_of(gone)) == {ctr("a")}
    assert applied(book, change, gone) == [Transition(ctr("a"), before, None)]
    assert ctr("a") not in book.standings
    assert book.results == Counter({Result.FAIL: 1})
    assert book.failing_codes == Counter({Code.NETWORK_NOT_READY: 1})
    assert book.affected(Change(networks=frozenset({"net-a"})), {}) == {ctr("ab")}

    assert [t.after for t in applied(book, Change(runtimes=frozenset({ctr("ab")})), cluster())] == [
        None
    ]
    assert (book.standings, book.results, book.failing_codes) == ({}, Counter(), Counter())
    assert book.affected(Change(networks=frozenset({"net-a", "net-b"})), {}) == set()


def test_everything_rejudges_all_and_reports_the_gone_runtimes() -> None:
    book = primed(cluster(ONE, TWO, PLAIN, bound("custom", annotations=wired(PAIRS))))
    view = cluster(ONE, down=["net-a"])
    assert book.affected(EVERYTHING, runtimes_of(view)) == {
        ctr("a"),
        ctr("b"),
        ctr("custom"),
        ctr("plain"),
    }
    transitions = applied(book, EVERYTHING, view)
    assert [(t.key, t.before, t.after is None) for t in transitions] == [
        (ctr("a"), PASSING, False),
        (ctr("b"), PASSING, True),
        (ctr("custom"), PASSING, True),
        (ctr("plain"), PASSING, True),
    ]
    assert book.standings == from_scratch(view, Policy())
    assert book.results == Counter({Result.FAIL: 1})
    assert book.affected(Change(recipe=True), {}) == set()
    # Only ``a`` is left, failing NotReady (its message lists the cluster's Networks).
    assert book.affected(Change(networks=frozenset({"net-b"})), {}) == {ctr("a")}


def test_everything_includes_runtimes_the_book_has_not_seen() -> None:
    book = primed(cluster(ONE))
    assert book.affected(EVERYTHING, runtimes_of(cluster(ONE, TWO))) == {ctr("a"), ctr("b")}


def test_rejudge_takes_the_keys_it_is_given() -> None:
    view = cluster(ONE, TWO, down=["net-a", "net-b"])
    book = DriftBook(Policy())
    transitions = book.rejudge([ctr("b")], view)
    assert [(t.key, t.before) for t in transitions] == [(ctr("b"), None)]
    assert set(book.standings) == {ctr("b")}
    assert book.results == Counter({Result.FAIL: 1})


# -- DriftBook: shared name sets ---------------------------------------------------------------


def test_runtimes_naming_the_same_networks_share_one_name_tuple() -> None:
    copies = [naming(f"copy-{i}", "net-a", "net-b") for i in range(3)]
    book = primed(cluster(*copies, PLAIN))
    # One tuple of names for the three copies; the runtime naming nothing costs nothing.
    named = [book._named[ctr(f"copy-{i}")] for i in range(3)]
    assert named[0] == ("default", "net-a", "net-b")
    assert named[1] is named[0]
    assert named[2] is named[0]
    assert set(book._named) == {ctr(f"copy-{i}") for i in range(3)}

    applied(book, EVERYTHING, cluster())
    assert (book._named, book._bound) == ({}, set())


# -- DriftBook: a partial view changes nothing -------------------------------------------------


@pytest.mark.parametrize("part", PARTS)
def test_a_partial_view_returns_why_and_changes_nothing(part: str) -> None:
    book = primed(cluster(*FIVE, down=["net-a"]))
    standings, results, codes = (
        dict(book.standings),
        Counter(book.results),
        Counter(book.failing_codes),
    )
    partial = replace(cluster(TWO), **_lost(part))

    assert book.apply(EVERYTHING, partial) is LOST
    assert book.apply(Change(runtimes=frozenset({ctr("a")})), partial) is LOST
    assert book.rejudge(sorted(standings), partial) == []
    assert (book.standings, book.results, book.failing_codes) == (standings, results, codes)
    assert book.affected(Change(networks=frozenset({"net-a"})), {}) == {ctr("a"), ctr("ab")}


# -- incremental == from scratch ---------------------------------------------------------------


@dataclass(frozen=True)
class Flip:
    network: str


@dataclass(frozen=True)
class Toggle:
    runtime: str


@dataclass(frozen=True)
class RecipeMoves:
    pass


Step = Flip | Toggle | RecipeMoves

POOL: dict[str, dict[str, object]] = {
    "a": ONE,
    "b": TWO,
    "ab": BOTH,
    "plain": PLAIN,
    "bound": bound("bound", annotations=wired(PAIRS)),
    "mpi": mpi_runtime(
        "mpi", launcher=wired(pairs_for(["net-c"])), node=wired(pairs_for(["net-a", "net-c"]))
    ),
}
steps = st.one_of(
    st.builds(Flip, st.sampled_from(NETS)),
    st.builds(Toggle, st.sampled_from(sorted(POOL))),
    st.just(RecipeMoves()),
)


def essence(standing: Standing) -> tuple[Result, tuple[tuple[Code, str], ...]]:
    """What a standing says, but the wording of its messages (see the note in the test)."""
    return standing.result, tuple((v.code, v.field) for v in standing.findings)


@settings(max_examples=examples(150))
@given(
    # A runtime is toggled at most once a pass, so every runtime a change names exists before
    # the pass or after it.
    st.lists(st.lists(steps, min_size=1, max_size=3, unique=True), max_size=8),
    st.sampled_from([Policy(), WARN_ONLY]),
)
def test_incremental_standings_and_counts_equal_a_judgement_from_scratch(
    passes: list[list[Step]], policy: Policy
) -> None:
    down: set[str] = set()
    present = set(POOL)
    moved = False

    def view_now() -> ClusterSnapshot:
        objects = [POOL[name] for name in sorted(present)]
        return cluster(*objects, down=down, recipe=REVERSED if moved else PAIRS)

    book = DriftBook(policy)
    published: dict[RuntimeKey, Standing] = {}
    for group in [[], *passes]:
        change = EVERYTHING if not group else Change()
        for step in group:
            if isinstance(step, Flip):
                down ^= {step.network}
                change |= Change(networks=frozenset({step.network}))
            elif isinstance(step, Toggle):
                present ^= {step.runtime}
                change |= Change(runtimes=frozenset({ctr(step.runtime)}))
            else:
                moved = not moved
                change |= Change(recipe=True)
        for transition in applied(book, change, view_now()):
            assert transition.before == published.get(transition.key)
            if transition.after is None:
                published.pop(transition.key)
            else:
                published[transition.key] = transition.after
        assert book.results == counted_results(book)
        assert book.failing_codes == counted_codes(book)

    final = from_scratch(view_now(), policy)
    assert published == book.standings
    # Exact, wording included: NotReady/NotFound messages list the cluster's other Networks,
    # so runtimes failing with them are re-judged on any Network change.
    assert book.standings == final
    assert Counter(s.result for s in final.values()) == book.results


def test_a_runtime_created_and_deleted_between_two_passes_is_no_transition() -> None:
    book = primed(cluster(ONE))
    assert applied(book, Change(runtimes=frozenset({ctr("flash")})), cluster(ONE)) == []
    assert set(book.standings) == {ctr("a")}


def test_a_runtime_that_stops_naming_a_network_is_no_longer_affected_by_it() -> None:
    book = primed(cluster(ONE, BOTH))
    net_a = Change(networks=frozenset({"net-a"}))
    assert book.affected(net_a, {}) == {ctr("a"), ctr("ab")}
    applied(book, Change(runtimes=frozenset({ctr("a")})), cluster(BOTH))
    assert book.affected(net_a, {}) == {ctr("ab")}


def test_a_runtime_moving_to_networks_others_name_is_affected_with_them() -> None:
    book = primed(cluster(ONE, BOTH))
    moved = cluster(naming("a", "net-a", "net-b"), BOTH)
    applied(book, Change(runtimes=frozenset({ctr("a")})), moved)
    assert book._named[ctr("a")] is book._named[ctr("ab")]
    assert book.affected(Change(networks=frozenset({"net-b"})), {}) == {ctr("a"), ctr("ab")}
    both = Change(networks=frozenset({"net-b", "elsewhere"}))
    assert book.affected(both, {}) == {ctr("a"), ctr("ab")}


def test_to_judge_lists_what_is_affected_in_key_order() -> None:
    book = primed(cluster(ONE, TWO))
    view = cluster(TWO, BOTH)
    runtimes = runtimes_of(view)
    assert book.to_judge(EVERYTHING, runtimes) == sorted(book.affected(EVERYTHING, runtimes))
    network = Change(networks=frozenset({"net-a", "net-b"}))
    assert book.to_judge(network, runtimes) == sorted(book.affected(network, runtimes))


# -- DriftBook: ResourceClaimTemplates ---------------------------------------------------------


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        pytest.param([node_job()], (), id="no-claims"),
        pytest.param([claimed_job(by_template("rdma"))], ("rdma",), id="node"),
        pytest.param(
            [
                claimed_job(by_template("rdma"), by_template("imex", name="channel")),
                claimed_job(by_template("rdma"), name="launcher"),
            ],
            ("imex", "rdma"),
            id="each-once-sorted",
        ),
        pytest.param(
            [node_job(), claimed_job(by_template("other"), name="dataset-initializer")],
            ("other",),
            id="another-job",
        ),
        pytest.param(
            [claimed_job({"name": "shared", "resourceClaimName": "c"}, {"name": "x"})],
            (),
            id="no-template-named",
        ),
    ],
)
def test_named_claim_templates_are_those_any_pod_template_names(
    jobs: list[object], expected: tuple[str, ...]
) -> None:
    assert named_claim_templates(runtime("r", kind=TR, jobs=jobs)) == expected


CLAIMING = runtime("claiming", kind=TR, jobs=[claimed_job(by_template("default-rdma"))])
ELSEWHERE = runtime(
    "elsewhere", kind=TR, namespace="other", jobs=[claimed_job(by_template("default-rdma"))]
)
CLUSTER_WIDE = runtime("cluster-wide", jobs=[claimed_job(by_template("default-rdma"))])
BOUND_CLUSTER_WIDE = dra_runtime(by_template("default-rdma"), name="bound", kind=CTR)
IMEX_ONLY = runtime("imex", kind=TR, jobs=[claimed_job(by_template("imex-channel"))])


def test_a_claim_template_change_rejudges_the_runtimes_whose_pods_would_claim_it() -> None:
    view = cluster(CLAIMING, ELSEWHERE, CLUSTER_WIDE, BOUND_CLUSTER_WIDE, IMEX_ONLY, PLAIN)
    book = primed(view)
    runtimes = runtimes_of(view)

    def affected(*templates: tuple[str, str]) -> set[RuntimeKey]:
        return book.affected(Change(claim_templates=frozenset(templates)), runtimes)

    bound = (CTR, "", "bound")
    assert affected(("team", "default-rdma")) == {tr("claiming"), bound}
    assert affected(("other", "default-rdma")) == {(TR, "other", "elsewhere"), bound}
    assert affected(("team", "imex-channel"), ("other", "imex-channel")) == {tr("imex")}
    # A DRA-bound ClusterTrainingRuntime reserves its names in every namespace; an unbound one's
    # templates are judged with each TrainJob only.
    assert affected(("any", "default-rdma")) == {bound}
    assert affected(("team", "unnamed")) == set()


def test_a_runtime_change_moves_it_in_and_out_of_the_claim_template_index() -> None:
    book = primed(cluster(CLAIMING))
    change = Change(claim_templates=frozenset({("team", "default-rdma")}))
    assert book.affected(change, {}) == {tr("claiming")}
    unclaimed = runtime("claiming", kind=TR)
    applied(book, Change(runtimes=frozenset({tr("claiming")})), cluster(unclaimed))
    assert book.affected(change, {}) == set()
    applied(book, Change(runtimes=frozenset({tr("claiming")})), cluster(CLAIMING))
    assert book.affected(change, {}) == {tr("claiming")}
    applied(book, Change(runtimes=frozenset({tr("claiming")})), cluster())
    assert book.affected(change, {}) == set()


def test_a_deleted_claim_template_fails_the_dra_bound_runtime_naming_it() -> None:
    labels = {"nicguard.dev/profile": "a4-dranet"}
    claiming = runtime(
        "claiming", kind=TR, labels=labels, jobs=[claimed_job(by_template("default-rdma"))]
    )
    book = primed(cluster(claiming, claim_template()))
    assert book.standings == {tr("claiming"): PASSING}
    change = Change(claim_templates=frozenset({("team", "default-rdma")}))
    (transition,) = applied(book, change, cluster(claiming))
    assert (transition.key, transition.before) == (tr("claiming"), PASSING)
    assert transition.after is not None
    assert transition.after.codes == (Code.RESOURCE_CLAIM_TEMPLATE_NOT_FOUND,)
    assert applied(book, change, cluster(claiming, claim_template())) == [
        Transition(tr("claiming"), transition.after, PASSING)
    ]
