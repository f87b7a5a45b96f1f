"""The continuous audit on a real control plane (docs/audit.md, ``nicguard audit``).

A runtime admitted yesterday can drift today without anyone editing it: a Network it names turns
NotReady, or the recipe it is bound to changes. Each replica re-judges the affected runtimes, the
holder of Lease ``nicguard-auditor`` says so with Events and policy reports, and ``nicguard audit``
gives the same verdicts on demand.

Two control planes. One serves the OpenReports API from the start, with one nicguard run with
``--protect=warn`` (so the recipe can be swapped). The other serves no report API at first, then
the Policy WG's (``test_without_a_report_api_...`` installs it; the tests after it in this file
need it and install it themselves when run alone), with two replicas: one writer at a time, and no
Event said twice, also across a change of writer. "Exactly once" is counted after the barrier
(``audit.Barrier``) has been crossed: nothing said before it can still arrive. Measured latencies
(a flip seen, a Lease taken over or handed over) are logged (``pytest -rP``), not asserted: a busy
machine decides them; every wait for them only bounds a hang.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

import pytest
import yaml

from tests.harness import expect
from tests.harness.audit import (
    CLUSTER_EVENTS,
    DRIFT,
    NUMBERS,
    OPENREPORTS,
    REPORTING_CONTROLLER,
    RESTORED,
    TCPXO_CTR,
    WGPOLICYK8S,
    Api,
    AuditEvent,
    Barrier,
    Ref,
    ReportKinds,
    Timed,
    Verdict,
    audit_complaints,
    audit_events,
    count,
    gauge,
    lease_holder,
    metrics,
    names_network,
    network_status,
    new_events,
    nicguard_audit,
    recipe_bound,
    report_verdicts,
    reports,
    runtimes,
    shown,
    takeovers,
    timed,
    verdicts_of_audit,
    wait_reports_quiet,
)
from tests.harness.objects import RECIPE_PAIRS, Obj, runtime, unique
from tests.harness.procs import wait_until
from tests.harness.stack import Stack, populate, recipe_edited, running
from tests.harness.state import NETWORKS, checked, create_namespace, install_report_crds, set_status
from tests.harness.webhook import Nicguard

pytestmark = pytest.mark.e2e

TEAM: Final = "team-a"
FLIPPED: Final = "gpu-nic-3"  # eth4 of the recipe and of every TCPXO runtime
NOT_READY: Final = "NetworkNotReady"
DIVERGES: Final = "MappingDivergesFromRecipe"
MISPLACED: Final = "NetworkMisplaced"
SETTLE: Final = 15.0
# Lease duration 15 s, renewed every 2 s: taken over ~17 s after a SIGKILL. Bounds a hang only.
TAKEOVER_TIMEOUT: Final = 90.0
# A released Lease is taken at the next renewal (2 s). Bounds a hang only.
HANDOVER_TIMEOUT: Final = 30.0
# A writer without a report API looks again every 30 s. Bounds a hang only.
DISCOVERY_TIMEOUT: Final = 120.0
RUNTIMES_GAUGE: Final = "nicguard_audit_runtimes"
VIOLATIONS_GAUGE: Final = "nicguard_audit_violations"
TWO_NICS: Final = (("eth1", "gpu-nic-0"), ("eth2", "gpu-nic-1"))
# The recipe re-recorded with the Networks of eth3 and eth4 exchanged (as in test_recipe.py).
SWAPPED: Final = [
    *RECIPE_PAIRS[:2],
    ("eth3", "gpu-nic-3"),
    ("eth4", "gpu-nic-2"),
    *RECIPE_PAIRS[4:],
]


@dataclass(frozen=True, slots=True)
class Audited:
    """A stack with the runtimes of this module, its barrier and its replicas by pod name."""

    stack: Stack
    api: Api
    barrier: Barrier
    naming: frozenset[Ref]  # created here, naming FLIPPED
    not_naming: frozenset[Ref]  # created here, wired to gpu-nic-0/1 only
    labelled: frozenset[Ref]  # created here, labelled recipe-bound
    replicas: Mapping[str, Nicguard]

    def report(self) -> str:
        return "\n".join([self.stack.plane.report(), *(r.report() for r in self.replicas.values())])


def deployed(stack: Stack, replicas: Mapping[str, Nicguard]) -> Audited:
    """Namespace ``team-a`` with three TrainingRuntimes, two ClusterTrainingRuntimes, and the
    barrier; every runtime admitted by nicguard without a warning."""
    create_namespace(stack.plane, TEAM)
    tcpxo = runtime(unique("tcpxo"), namespace=TEAM)
    labelled = runtime(unique("tcpxo-bound"), namespace=TEAM, recipe_bound=True)
    two_nics = runtime(unique("two-nics"), namespace=TEAM, pairs=TWO_NICS)
    ctr = runtime(unique("tcpxo-ctr"))
    ctr_two_nics = runtime(unique("two-nics-ctr"), pairs=TWO_NICS)
    run = stack.apply(tcpxo, labelled, two_nics, ctr, ctr_two_nics)
    expect.allowed(run, " created")
    barrier = Barrier(stack).create()

    def ref(obj: Obj) -> Ref:
        return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])

    return Audited(
        stack,
        Api(stack.plane),
        barrier,
        naming=frozenset(ref(o) for o in (tcpxo, labelled, ctr)),
        not_naming=frozenset(ref(o) for o in (two_nics, ctr_two_nics)),
        labelled=frozenset({ref(labelled)}),
        replicas=replicas,
    )


@pytest.fixture(scope="module")
def openreports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Audited]:
    """One nicguard (``--protect=warn``), the OpenReports CRDs served from the start."""
    workdir = tmp_path_factory.mktemp("audit-openreports")
    args = ["--pod-name=solo", "--protect=warn"]
    with running(workdir, nicguard_args=args, report_apis=["openreports"]) as stack:
        populate(stack)
        yield deployed(stack, {"solo": stack.nicguard})


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Audited]:
    """Two replicas (``replica-a`` behind the webhook, ``replica-b``); no report API at first:
    ``test_without_a_report_api_...`` installs the Policy WG's CRDs, the tests after it use them."""
    workdir = tmp_path_factory.mktemp("audit-replicas")
    with running(workdir, nicguard_args=["--pod-name=replica-a"]) as stack:
        (workdir / "replica-b").mkdir()
        second = Nicguard(stack.plane, workdir / "replica-b", args=["--pod-name=replica-b"])
        try:
            second.start()
            populate(stack)
            yield deployed(stack, {"replica-a": stack.nicguard, "replica-b": second})
        finally:
            second.stop()


@pytest.fixture
def policy_reports(replicated: Audited) -> Audited:
    """``replicated`` with the wgpolicyk8s CRDs served and nicguard's PolicyReports written."""
    if not replicated.api.served(WGPOLICYK8S.group_version):
        install_report_crds(replicated.stack.plane, WGPOLICYK8S.api)
    wait_passing(replicated, WGPOLICYK8S, timeout=DISCOVERY_TIMEOUT)
    return replicated


# --- what every scenario reads -------------------------------------------------------------


def live(audited: Audited) -> list[Nicguard]:
    return [r for r in audited.replicas.values() if r.process is not None and r.process.running()]


def fail_gauges(audited: Audited) -> list[float]:
    return [gauge(metrics(r), RUNTIMES_GAUGE, result="fail") for r in live(audited)]


def all_pass(audited: Audited, kinds: ReportKinds | None) -> bool:
    """Every runtime of the cluster passing, in every live replica's gauges and (when ``kinds``)
    in the reports."""
    total = len(runtimes(audited.api))
    for replica in live(audited):
        samples = metrics(replica)
        counts = {r: gauge(samples, RUNTIMES_GAUGE, result=r) for r in ("pass", "warn", "fail")}
        if counts != {"pass": total, "warn": 0, "fail": 0}:
            return False
    if kinds is None:
        return True
    verdicts = report_verdicts(audited.api, kinds)
    return len(verdicts) == total and all(v == ("pass", ()) for v in verdicts.values())


def wait_passing(audited: Audited, kinds: ReportKinds | None, timeout: float = SETTLE) -> None:
    wait_until(
        lambda: all_pass(audited, kinds) or None,
        timeout=timeout,
        what="every runtime to pass in the audit",
        diagnose=lambda: f"{verdicts_shown(audited, kinds)}\n{audited.report()}",
    )


def verdicts_shown(audited: Audited, kinds: ReportKinds | None) -> str:
    if kinds is None:
        return "(no reports)"
    rows = sorted(report_verdicts(audited.api, kinds).items())
    return "reports:\n" + "\n".join(f"  {shown(ref)}: {verdict}" for ref, verdict in rows)


def affected_by(audited: Audited, network: str) -> tuple[dict[Ref, Obj], set[Ref]]:
    """The cluster's runtimes, and those naming ``network`` (checked against what was created)."""
    everything = runtimes(audited.api)
    affected = {ref for ref, obj in everything.items() if names_network(obj, network)}
    assert audited.naming | {TCPXO_CTR} <= affected, (sorted(affected), sorted(audited.naming))
    assert not audited.not_naming & affected
    return everything, affected


@dataclass(frozen=True, slots=True)
class Flip:
    timing: Timed
    events: list[AuditEvent]  # new, of the expected reason, on the affected runtimes

    def event_latencies(self) -> list[float]:
        return sorted(round(e.at - self.timing.start, 3) for e in self.events)


def flip(
    audited: Audited,
    *,
    ready: bool,
    affected: set[Ref],
    kinds: ReportKinds | None,
    measured: bool = False,
) -> Flip:
    """Write ``FLIPPED``'s Ready condition, then time Events, reports and every live replica's
    fail gauge until each shows the change (the clock starts just before ``kubectl patch``).

    ``measured``: the reports are first left quiet for one coalescing interval, so that the
    times logged are the audit's, not the 2-s spacing of writes (docs/audit.md) after an
    unrelated earlier write. The times are the caller's to log, never asserted.
    """
    api = audited.api
    reason = RESTORED if ready else DRIFT
    expected: Verdict = ("pass", ()) if ready else ("fail", (NOT_READY,))
    fail_after = 0 if ready else len(affected)  # every scenario starts from all passing

    def diagnose() -> str:
        return f"{verdicts_shown(audited, kinds)}\n{audited.report()}"

    def events_said() -> bool:
        return set(count(new_events(api, before), reason)) >= affected

    def reports_show() -> bool:
        assert kinds is not None
        verdicts = report_verdicts(api, kinds)
        return all(verdicts.get(ref) == expected for ref in affected)

    def gauges_show() -> bool:
        return all(value == fail_after for value in fail_gauges(audited))

    checks = {"events": events_said, "metrics": gauges_show}
    if kinds is not None:
        checks["reports"] = reports_show
        if measured:
            wait_reports_quiet(api, kinds, diagnose)
    before = audit_events(api)
    start = time.time()
    set_status(audited.stack.plane, NETWORKS, FLIPPED, network_status(FLIPPED, ready=ready))
    timing = timed(start, checks, timeout=SETTLE, diagnose=diagnose)
    said = [e for e in new_events(api, before) if e.reason == reason and e.regarding in affected]
    return Flip(timing, said)


def settled_events(audited: Audited, before: list[AuditEvent]) -> list[AuditEvent]:
    """Everything nicguard said since ``before``, once the barrier proved it has all been said
    (the barrier's own Events left out)."""
    audited.barrier.cross()
    return [e for e in new_events(audited.api, before) if e.regarding != audited.barrier.ref]


def assert_said_once(
    said: list[AuditEvent], expected: Mapping[Ref, tuple[int, int]], everything: set[Ref]
) -> None:
    """Exactly (drifts, restores) per runtime of ``expected``; nothing about the others."""
    drifts, restores = count(said, DRIFT), count(said, RESTORED)
    wrong = {
        shown(ref): (drifts[ref], restores[ref])
        for ref in everything
        if (drifts[ref], restores[ref]) != expected.get(ref, (0, 0))
    }
    unknown = {shown(e.regarding) for e in said} - {shown(ref) for ref in everything}
    assert not wrong, f"(drifts, restores) per runtime, expected {expected}: {wrong}"
    assert not unknown, unknown


def kubectl_events(audited: Audited, ref: Ref) -> str:
    kind, namespace, name = ref
    args = ["events", "-n", namespace or CLUSTER_EVENTS, "--for", f"{kind.lower()}/{name}"]
    return checked(audited.stack.kubectl(*args, who="admin"), "kubectl events").stdout


# --- 1. a Network flips ----------------------------------------------------------------------


def test_a_network_turning_not_ready_is_reported_and_restored(openreports: Audited) -> None:
    audited, api = openreports, openreports.api
    everything, affected = affected_by(audited, FLIPPED)
    wait_passing(audited, OPENREPORTS)
    before = audit_events(api)

    drift = flip(audited, ready=False, affected=affected, kinds=OPENREPORTS, measured=True)
    samples = metrics(audited.stack.nicguard)
    assert gauge(samples, VIOLATIONS_GAUGE, code=NOT_READY) == len(affected)
    assert gauge(samples, RUNTIMES_GAUGE, result="pass") == len(everything) - len(affected)
    for event in drift.events:
        ref = event.regarding
        assert event.type == "Warning", event
        assert event.controller == REPORTING_CONTROLLER, event
        assert event.namespace == (ref[1] or CLUSTER_EVENTS), event
        assert event.note.startswith(f"[{NOT_READY}] "), event
        assert f"eth4->{FLIPPED}" in event.note, event
        assert event.findings, event
    assert_reports_name_the_failure(audited, everything, affected)
    tr = min(audited.naming & {r for r in affected if r[0] == "TrainingRuntime"})
    for ref in (tr, TCPXO_CTR):
        assert DRIFT in kubectl_events(audited, ref), shown(ref)

    restore = flip(audited, ready=True, affected=affected, kinds=OPENREPORTS, measured=True)
    assert gauge(metrics(audited.stack.nicguard), VIOLATIONS_GAUGE, code=NOT_READY) == 0
    for event in restore.events:
        assert (event.type, event.controller) == ("Normal", REPORTING_CONTROLLER), event
        assert event.regarding in everything, event
    assert RESTORED in kubectl_events(audited, TCPXO_CTR)
    wait_passing(audited, OPENREPORTS)

    said = settled_events(audited, before)
    assert_said_once(said, dict.fromkeys(affected, (1, 1)), set(everything))
    NUMBERS.info(
        "AUDIT flip %s NotReady (%d runtimes affected of %d): first seen after the write %s, "
        "eventTime - write %s; back to Ready: %s, %s",
        FLIPPED,
        len(affected),
        len(everything),
        rounded(drift.timing.seen),
        drift.event_latencies(),
        rounded(restore.timing.seen),
        restore.event_latencies(),
    )


def rounded(seen: Mapping[str, float]) -> dict[str, float]:
    return {name: round(seconds, 3) for name, seconds in sorted(seen.items())}


def assert_reports_name_the_failure(
    audited: Audited, everything: Mapping[Ref, Obj], affected: set[Ref]
) -> None:
    """Each report: labelled, summary = its results; each failing result as docs/audit.md has it."""
    found = reports(audited.api, OPENREPORTS)
    assert {(r["kind"], r["metadata"].get("namespace", "")) for r in found} >= {
        ("ClusterReport", ""),
        ("Report", TEAM),
    }
    for report in found:
        assert report["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "nicguard"
        results = report["results"]
        tally = {k: sum(1 for r in results if r["result"] == k) for k in ("pass", "fail", "warn")}
        assert {k: report["summary"][k] for k in tally} == tally, report["summary"]
        for result in results:
            (resource,) = result["resources"]
            ref = (resource["kind"], resource.get("namespace", ""), resource["name"])
            assert ref in everything, resource  # by kind, namespace and name (no uid cached)
            assert (result["source"], result["policy"]) == ("nicguard", "nicguard-wiring")
            if ref in affected:
                assert (result["rule"], result["result"]) == (NOT_READY, "fail"), result
                assert f"eth4->{FLIPPED}" in result["message"], result
                assert result["properties"]["field"].endswith("].network"), result
            else:
                assert (result["rule"], result["result"]) == ("wiring", "pass"), result


# --- 2. the recipe is swapped ----------------------------------------------------------------


def test_a_swapped_recipe_fails_the_bound_runtimes_and_those_it_places_until_restored(
    openreports: Audited,
) -> None:
    audited, api = openreports, openreports.api
    everything = runtimes(api)
    bound = {ref for ref, obj in everything.items() if recipe_bound(ref, obj)}
    assert audited.labelled | {TCPXO_CTR} <= bound
    # Unbound runtimes naming the swapped Networks are placed by the recipe (NetworkMisplaced).
    placed = {
        ref
        for ref, obj in everything.items()
        if ref not in bound and any(names_network(obj, n) for n in ("gpu-nic-2", "gpu-nic-3"))
    }
    assert audited.naming - audited.labelled <= placed
    assert not placed & audited.not_naming
    failing = dict.fromkeys(bound, DIVERGES) | dict.fromkeys(placed, MISPLACED)
    wait_passing(audited, OPENREPORTS)
    before = audit_events(api)
    mapping = yaml.safe_dump([{"interfaceName": i, "network": n} for i, n in SWAPPED])

    def diverging() -> bool:
        verdicts = report_verdicts(api, OPENREPORTS)
        said = count(new_events(api, before), DRIFT)
        return all(
            verdicts.get(ref) == ("fail", (code,)) and said[ref] for ref, code in failing.items()
        )

    with recipe_edited(audited.stack, {"tcpxoInterfaces": mapping}):
        wait_until(
            lambda: diverging() or None,
            timeout=SETTLE,
            what="every recipe-bound runtime to diverge and every placed one to be misplaced",
            diagnose=lambda: f"{verdicts_shown(audited, OPENREPORTS)}\n{audited.report()}",
        )
        verdicts = report_verdicts(api, OPENREPORTS)
        unaffected = set(everything) - set(failing)
        assert all(verdicts[ref][0] != "fail" for ref in unaffected), verdicts
        for event in new_events(api, before):
            lead = (
                f"[{DIVERGES}] at position eth3 "
                if event.regarding in bound
                else f"[{MISPLACED}] Networks on another interface than the recipe gives them: "
            )
            assert event.note.startswith(lead), event
        (tcpxo,) = (
            result
            for result in report_of(api, "")["results"]
            if result["resources"][0]["name"] == TCPXO_CTR[2]
        )
        assert "the recipe records eth3->gpu-nic-3" in tcpxo["message"], tcpxo
    wait_until(
        lambda: (
            (all_pass(audited, OPENREPORTS) and restored_all(api, before, set(failing))) or None
        ),
        timeout=SETTLE,
        what="the recipe-bound and placed runtimes to be restored",
        diagnose=audited.report,
    )
    said = settled_events(audited, before)
    assert_said_once(said, dict.fromkeys(failing, (1, 1)), set(everything))


def report_of(api: Api, namespace: str) -> Obj:
    kinds = OPENREPORTS
    path = kinds.path(kinds.namespaced if namespace else kinds.cluster, namespace, "nicguard")
    found = api.get(path)
    assert found is not None, path
    return found


def restored_all(api: Api, before: list[AuditEvent], refs: set[Ref]) -> bool:
    return set(count(new_events(api, before), RESTORED)) >= refs


# --- 4. nicguard audit ------------------------------------------------------------------------


def test_nicguard_audit_agrees_with_the_reports_and_they_apply(openreports: Audited) -> None:
    audited, api, plane = openreports, openreports.api, openreports.stack.plane
    wait_passing(audited, OPENREPORTS)
    everything = set(runtimes(api))
    run = nicguard_audit(plane, "--output", "json")
    assert run.returncode == 0, expect.shown(run)
    assert verdicts_of_audit(run.stdout) == report_verdicts(api, OPENREPORTS)
    assert set(verdicts_of_audit(run.stdout)) == everything
    assert_reports_apply(audited, OPENREPORTS)

    barrier = audited.barrier
    broken: Verdict = ("fail", (NOT_READY,))
    barrier.set_ready(False)
    try:
        wait_until(
            lambda: report_verdicts(api, OPENREPORTS).get(barrier.ref) == broken or None,
            timeout=SETTLE,
            what="the barrier runtime to fail in its report",
            diagnose=audited.report,
        )
        run = nicguard_audit(plane, "--output", "json")
        assert run.returncode == 1, expect.shown(run)
        shown_by_audit = verdicts_of_audit(run.stdout)
        assert shown_by_audit[barrier.ref] == broken
        assert shown_by_audit == report_verdicts(api, OPENREPORTS)
        assert_reports_apply(audited, OPENREPORTS)

        text = nicguard_audit(plane)
        assert text.returncode == 1, expect.shown(text)
        assert f"FAIL TrainingRuntime {barrier.namespace}/barrier" in text.stdout, text.stdout
        assert f"[{NOT_READY}] " in text.stdout

        team = nicguard_audit(plane, "--output", "json", "--namespace", TEAM)
        assert team.returncode == 0, expect.shown(team)  # the failing runtime is elsewhere
        in_team = {ref for ref in everything if ref[:2] == ("TrainingRuntime", TEAM)}
        assert set(verdicts_of_audit(team.stdout)) == in_team
        assert len(in_team) == 3
        alone = nicguard_audit(plane, "--output", "json", "--namespace", barrier.namespace)
        assert alone.returncode == 1, expect.shown(alone)
        assert verdicts_of_audit(alone.stdout) == {barrier.ref: broken}
    finally:
        barrier.set_ready(True)
    wait_passing(audited, OPENREPORTS)


def assert_reports_apply(audited: Audited, kinds: ReportKinds, *args: str) -> list[Obj]:
    """``nicguard audit --output reports ARGS | kubectl apply --dry-run=server -f -`` succeeds
    for a ``kinds`` report per namespace with runtimes and the cluster report."""
    plane = audited.stack.plane
    printed = nicguard_audit(plane, "--output", "reports", *args)
    assert printed.returncode in (0, 1), expect.shown(printed)
    documents = [d for d in yaml.safe_load_all(printed.stdout) if d]
    assert {d["apiVersion"] for d in documents} == {kinds.group_version}
    namespaces = {ref[1] for ref in runtimes(audited.api) if ref[1]}
    assert {(d["kind"], d["metadata"].get("namespace", "")) for d in documents} == {
        (kinds.cluster, ""),
        *((kinds.namespaced, ns) for ns in namespaces),
    }
    dry = plane.kubectl("admin", "apply", "--dry-run=server", "-f", "-", input=printed.stdout)
    assert dry.returncode == 0, expect.shown(dry)
    assert dry.stdout.count("(server dry run)") == len(documents), expect.shown(dry)
    return documents


# --- 5. which report API: none, then the Policy WG's --------------------------------------


def test_without_a_report_api_events_are_written_and_reports_follow_the_api(
    replicated: Audited,
) -> None:
    audited, api = replicated, replicated.api
    served = [k.api for k in (OPENREPORTS, WGPOLICYK8S) if api.served(k.group_version)]
    assert not served, f"the module runs in file order: this test needs no report API ({served})"
    everything, affected = affected_by(audited, FLIPPED)
    wait_passing(audited, None)
    before = audit_events(api)
    drift = flip(audited, ready=False, affected=affected, kinds=None)
    restore = flip(audited, ready=True, affected=affected, kinds=None)
    said = settled_events(audited, before)
    assert_said_once(said, dict.fromkeys(affected, (1, 1)), set(everything))
    writer = lease_holder(audited.stack.plane)
    assert {e.instance for e in said} == {writer}  # one writer of two replicas
    said_by = {name: takeovers(r) for name, r in audited.replicas.items()}
    assert [line.get("reports") for line in said_by[writer]] == ["none"], said_by
    for name, replica in audited.replicas.items():
        assert not audit_complaints(replica), (name, audit_complaints(replica))
    NUMBERS.info(
        "AUDIT no report API, 2 replicas: Events %s after the write (NotReady), %s (Ready)",
        drift.event_latencies(),
        restore.event_latencies(),
    )

    started = time.monotonic()
    install_report_crds(audited.stack.plane, WGPOLICYK8S.api)
    wait_passing(audited, WGPOLICYK8S, timeout=DISCOVERY_TIMEOUT)
    NUMBERS.info(
        "AUDIT PolicyReports written %.1f s after the wgpolicyk8s CRDs were created",
        time.monotonic() - started,
    )
    assert not api.served(OPENREPORTS.group_version)
    for replica in audited.replicas.values():
        assert not audit_complaints(replica), audit_complaints(replica)


def test_policy_reports_when_only_wgpolicyk8s_is_served(policy_reports: Audited) -> None:
    audited, api = policy_reports, policy_reports.api
    everything, affected = affected_by(audited, FLIPPED)
    found = reports(api, WGPOLICYK8S)
    assert {(r["kind"], r["metadata"].get("namespace", "")) for r in found} == {
        ("ClusterPolicyReport", ""),
        ("PolicyReport", TEAM),
        ("PolicyReport", audited.barrier.namespace),
    }
    assert {r["apiVersion"] for r in found} == {WGPOLICYK8S.group_version}
    drift = flip(audited, ready=False, affected=affected, kinds=WGPOLICYK8S, measured=True)
    verdicts = report_verdicts(api, WGPOLICYK8S)
    assert {ref for ref, v in verdicts.items() if v != ("pass", ())} == affected
    NUMBERS.info(
        "AUDIT PolicyReports, 2 replicas: flip %s NotReady first seen after the write %s",
        FLIPPED,
        rounded(drift.timing.seen),
    )
    flip(audited, ready=True, affected=affected, kinds=WGPOLICYK8S)
    wait_passing(audited, WGPOLICYK8S)
    assert set(report_verdicts(api, WGPOLICYK8S)) == set(everything)


def test_nicguard_audit_prints_policy_reports_the_cluster_accepts(policy_reports: Audited) -> None:
    audited = policy_reports
    run = nicguard_audit(audited.stack.plane, "--output", "json")
    assert run.returncode == 0, expect.shown(run)
    assert verdicts_of_audit(run.stdout) == report_verdicts(audited.api, WGPOLICYK8S)
    assert_reports_apply(audited, WGPOLICYK8S)  # discovered: the only API served
    assert_reports_apply(audited, WGPOLICYK8S, "--reports", "wgpolicyk8s")


# --- 3. two replicas, one writer -------------------------------------------------------------


def test_a_new_writer_repeats_nothing_and_misses_nothing(policy_reports: Audited) -> None:
    audited, api, plane = policy_reports, policy_reports.api, policy_reports.stack.plane
    for replica in audited.replicas.values():
        assert replica.probe("/readyz")[0] == 200, replica.report()
    everything, affected = affected_by(audited, FLIPPED)
    holder = lease_holder(plane)
    assert holder in audited.replicas, holder
    writer = audited.replicas[holder]
    (standby_name,) = set(audited.replicas) - {holder}
    standby = audited.replicas[standby_name]
    before = audit_events(api)

    drift = flip(audited, ready=False, affected=affected, kinds=WGPOLICYK8S)
    assert {e.instance for e in drift.events} == {holder}
    assert_said_once(
        settled_events(audited, before), dict.fromkeys(affected, (1, 0)), set(everything)
    )

    assert writer.process is not None
    killed = time.monotonic()
    writer.process.kill()  # SIGKILL: the Lease is not released, it has to expire
    set_status(plane, NETWORKS, FLIPPED, network_status(FLIPPED, ready=True))
    wait_until(
        lambda: lease_holder(plane) == standby_name or None,
        timeout=TAKEOVER_TIMEOUT,
        what=f"{standby_name} to take the auditor Lease",
        interval=0.2,
        diagnose=audited.report,
    )
    takeover = time.monotonic() - killed
    wait_until(
        lambda: (restored_all(api, before, affected) and all_pass(audited, WGPOLICYK8S)) or None,
        timeout=SETTLE,
        what="the new writer to restore every affected runtime",
        diagnose=audited.report,
    )
    said = settled_events(audited, before)
    assert_said_once(said, dict.fromkeys(affected, (1, 1)), set(everything))
    assert {e.instance for e in said if e.reason == RESTORED} == {standby_name}

    again = flip(audited, ready=False, affected=affected, kinds=WGPOLICYK8S)
    assert {e.instance for e in again.events} == {standby_name}
    assert_said_once(
        settled_events(audited, before), dict.fromkeys(affected, (2, 1)), set(everything)
    )

    # Graceful: the killed replica is back; SIGTERM on the writer hands the Lease over at once.
    writer.start()
    assert lease_holder(plane) == standby_name
    assert standby.process is not None
    terminated = time.monotonic()
    standby.process.signal(signal.SIGTERM)
    standby.process.wait(HANDOVER_TIMEOUT)
    # Released on the way out, not left to expire: once the writer has exited, the Lease names
    # no one or the replica that took it (an unreleased one would name the exited writer for
    # its 15 s).
    assert lease_holder(plane) in ("", holder)
    wait_until(
        lambda: lease_holder(plane) == holder or None,
        timeout=HANDOVER_TIMEOUT,
        what=f"{holder} to take the released Lease",
        interval=0.1,
        diagnose=audited.report,
    )
    handover = time.monotonic() - terminated
    standby.stop()
    back = flip(audited, ready=True, affected=affected, kinds=WGPOLICYK8S)
    assert {e.instance for e in back.events} == {holder}
    wait_passing(audited, WGPOLICYK8S)
    said = settled_events(audited, before)
    assert_said_once(said, dict.fromkeys(affected, (2, 2)), set(everything))
    for replica in live(audited):
        assert not audit_complaints(replica), audit_complaints(replica)
    NUMBERS.info(
        "AUDIT writer SIGKILLed: Lease taken over after %.1f s; SIGTERM: handed over after "
        "%.2f s; %d affected runtimes, 2 WiringDrift + 2 WiringRestored each, none repeated",
        takeover,
        handover,
        len(affected),
    )
    standby.start()  # both replicas again for whatever runs next
