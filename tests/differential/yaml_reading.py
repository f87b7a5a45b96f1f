"""What the YAML differential tests compare: a runtime copy as Trainer reads it (the oracle) and
as nicguard reads it, and JSON values compared with their types (``1``, ``1.0``, ``True`` and
``"true"`` are four values)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Final

from app.domain.claims import pod_claims
from app.domain.cluster import ClusterSnapshot
from app.domain.evaluate import evaluate
from app.domain.fields import FieldPath, as_list, as_map, value_at
from app.domain.kinds import Copy, Kind
from app.domain.policy import Policy
from app.domain.recipe import LoadYaml
from app.domain.review import Operation, Review
from app.domain.runtime_snapshot import RuntimeSnapshot, read_snapshot
from app.domain.template import (
    PodTemplate,
    runs_launcher_as_node,
    wired_positions,
    wired_templates,
)
from app.domain.verdict import Code, Verdict
from tests.builders import TRAINER_API, claim_template, copy_of, exactly, snapshot
from tests.differential.oracle import Oracle, Snapshot, SnapshotJob
from tests.differential.yaml_corpus import Case
from tests.support.examples import examples

Typed = tuple[object, ...]


def typed(value: object) -> Typed:
    """``value`` with every scalar tagged by its type, maps as sorted items."""
    if isinstance(value, Mapping):
        return ("map", tuple(sorted((str(k), typed(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("list", tuple(typed(item) for item in value))
    return (type(value).__name__, value)


@dataclass(frozen=True, slots=True)
class Reading:
    """What nicguard must read as Trainer does: the copy's identity, the MPI flag, the wired
    jobs and every job's Job-template labels, pod-template annotations and DRA claims."""

    api_version: Typed
    kind: str
    name: Typed
    namespace: Typed
    labels: Typed
    launcher_as_node: bool
    wired: tuple[tuple[str, Typed], ...]
    jobs: tuple[tuple[Typed, Typed, Typed, Typed], ...]


def _or(value: object, empty: object) -> Typed:
    return typed(empty if value is None else value)


def trainer_reading(found: Snapshot) -> Reading:
    kind = found.kind or (
        Kind.TRAINING_RUNTIME.value if found.namespace else Kind.CLUSTER_TRAINING_RUNTIME.value
    )
    return Reading(
        api_version=typed(found.api_version),
        kind=kind,
        name=typed(found.name),
        namespace=typed(found.namespace),
        labels=_or(found.labels, {}),
        launcher_as_node=found.run_launcher_as_node is True,
        wired=tuple(sorted((job.name, _or(job.annotations, {})) for job in found.wired)),
        jobs=tuple(
            (typed(job.name), _or(job.labels, {}), _or(job.annotations, {}), _trainer_claims(job))
            for job in found.jobs
        ),
    )


def _trainer_claims(job: SnapshotJob) -> Typed:
    """The pod's ``resourceClaims`` and each (init) container's ``resources.claims``."""
    return typed((job.resource_claims, job.container_claims, job.init_container_claims))


def _claims_read(job: object) -> Typed:
    """``_trainer_claims`` as nicguard reads them: the pod's claims as the DRA rules take them
    (app.domain.claims), the containers' by their exact keys; an unset name or request is Go's
    empty string."""
    pod = value_at(job, "template", "spec", "template", "spec")
    entries = pod_claims(value_at(pod, "resourceClaims"), FieldPath()).entries
    pod_refs = tuple((e.name or "", e.template, e.claim) for e in entries)

    def containers(key: str) -> tuple[object, ...]:
        return tuple(
            tuple(
                (value_at(c, "name") or "", value_at(c, "request") or "")
                for c in as_list(value_at(container, "resources", "claims")) or ()
            )
            for container in as_list(value_at(pod, key)) or ()
        )

    return typed((pod_refs, containers("containers"), containers("initContainers")))


def nicguard_reading(found: RuntimeSnapshot) -> Reading:
    runtime, kind = found.runtime, found.kind
    assert runtime is not None
    assert kind is not None
    jobs = as_list(value_at(runtime, "spec", "template", "spec", "replicatedJobs")) or []
    # A wired job by its name as written (nicguard names an unnamed one by its position), with
    # no annotations when it has no pod template; a wired name no job has is no job.
    wired = [
        (
            str(_or(value_at(jobs[position], "name"), "")[1]),
            typed(dict(t.annotations)) if isinstance(t, PodTemplate) else typed({}),
        )
        for t, (_, position) in zip(wired_templates(runtime), wired_positions(runtime), strict=True)
        if position is not None
    ]
    return Reading(
        api_version=_or(runtime.get("apiVersion"), ""),
        kind=kind.value,
        name=_or(value_at(runtime, "metadata", "name"), ""),
        namespace=_or(value_at(runtime, "metadata", "namespace"), ""),
        labels=_or(value_at(runtime, "metadata", "labels"), {}),
        launcher_as_node=runs_launcher_as_node(runtime),
        wired=tuple(sorted(wired)),
        jobs=tuple(
            (
                _or(value_at(job, "name"), ""),
                _or(value_at(job, "template", "metadata", "labels"), {}),
                _or(value_at(job, "template", "spec", "template", "metadata", "annotations"), {}),
                _claims_read(job),
            )
            for job in jobs
            if as_map(job) is not None
        ),
    )


POLICY: Final = Policy()
DEFAULT_RDMA: Final = "default-rdma"
ONE_NIC: Final = "rdma-one-nic"
NETDEV: Final = "default-netdev"
NETDEV_CLASS: Final = "netdev.google.com"


@cache
def _cluster() -> ClusterSnapshot:
    """Networks gpu-nic-0..7 and the recipe wanting eth1..eth8 on them (tests.builders), and the
    ResourceClaimTemplates of the snapshots' namespace: all RDMA NICs, one, the netdev NICs."""
    return snapshot(
        claim_template(DEFAULT_RDMA),
        claim_template(ONE_NIC, exactly(mode=None)),
        claim_template(NETDEV, exactly(NETDEV_CLASS)),
    )


def _judged(configmap: dict[str, object], found: RuntimeSnapshot) -> Verdict:
    request = Review(
        operation=Operation.CREATE,
        kind=Copy.RUNTIME_SNAPSHOT,
        namespace="team",
        obj=configmap,
        snapshot=found,
    )
    return evaluate(request, _cluster(), POLICY)


def _outcome(verdict: Verdict) -> tuple[bool, tuple[str, ...]]:
    return verdict.allowed, tuple(sorted({v.code.value for v in verdict.violations}))


def _allowed(outcome: tuple[bool, tuple[str, ...]]) -> bool:
    return outcome[0]


def judge_snapshot(oracle: Oracle, text: str, load_yaml: LoadYaml) -> tuple[str, str]:
    """How nicguard's reading of ``text`` as a snapshot's ``data.runtime`` compares with
    Trainer's: an outcome (FAIL-OPEN, the only failure, starts so) and the readings shown."""
    trainer = oracle.snapshot(text)
    configmap = copy_of(text)
    ours = read_snapshot(configmap, "job", load_yaml)
    if ours.problem is not None:
        verdict = _judged(configmap, ours)
        assert not verdict.allowed, verdict
        assert Code.RUNTIME_SNAPSHOT_INVALID in {v.code for v in verdict.violations}, verdict
        return "refused", f"nicguard: {ours.problem}\nTrainer: {trainer.error or 'reads it'}"
    if trainer.error is not None:
        return "Trainer cannot decode it", trainer.error
    theirs, read = trainer_reading(trainer), nicguard_reading(ours)
    shown = _differences(read, theirs)
    if read != theirs:
        return "FAIL-OPEN: read otherwise", shown
    assert trainer.runtime is not None
    built = {"apiVersion": TRAINER_API, **trainer.runtime, "kind": theirs.kind}
    on_copy = _outcome(_judged(configmap, ours))
    # Trainer's runtime judged at the same door: its pods run where the copy's do.
    as_copied = replace(ours, runtime=built, kind=Kind(theirs.kind))
    on_theirs = _outcome(_judged(configmap, as_copied))
    if _allowed(on_copy) != _allowed(on_theirs):
        return "FAIL-OPEN: judged otherwise", f"{shown}\ncopy: {on_copy}, Trainer's: {on_theirs}"
    return ("agreed, allowed" if on_copy[0] else "agreed, denied"), shown


def _differences(ours: Reading, theirs: Reading) -> str:
    """Each field the readings differ in, with only the differing items of the job lists."""
    lines = []
    for name in Reading.__slots__:
        mine, their = getattr(ours, name), getattr(theirs, name)
        if mine == their:
            continue
        if isinstance(mine, tuple) and name in ("wired", "jobs"):
            mine = tuple(item for item in mine if item not in their)
            their = tuple(item for item in their if item not in getattr(ours, name))
        lines.append(f"{name}: nicguard reads {mine}, Trainer reads {their}")
    return "\n".join(lines) or "the same"


def judge_file(
    oracle: Oracle, text: str, documents: Callable[[str], Iterable[object]]
) -> tuple[str, str]:
    """How nicguard's documents of a file compare with what kubectl sends for it."""
    kubectl = oracle.yaml_to_json(text)
    read: list[object] = []
    try:
        read.extend(documents(text))
    except (ValueError, RecursionError) as error:
        return "refused", f"nicguard: {error}\nkubectl: {kubectl.error or 'sends it'}"
    ours, theirs = [typed(d) for d in read], [typed(d) for d in kubectl.documents]
    shown = f"nicguard reads: {read}\nkubectl sends:  {list(kubectl.documents)}"
    if kubectl.error is not None:
        # kubectl sends the documents before its error; judging more is stricter.
        if ours[: len(theirs)] != theirs:
            return "FAIL-OPEN: read otherwise", f"{shown}\nkubectl stops: {kubectl.error}"
        return "kubectl stops on it", kubectl.error
    if ours != theirs:
        return "FAIL-OPEN: read otherwise", shown
    return "agreed", shown


def sampled(cases: Sequence[Case]) -> Sequence[Case]:
    """All of ``cases`` under the ci profile; under dev, an even share (``examples``) of a
    group larger than a hundred."""
    step = max(len(cases) // max(examples(len(cases)), 100), 1)
    return cases[::step]


def excerpt(text: str, limit: int = 2000) -> str:
    """``text`` as a failure shows it: whole when short (the label says where a long one was
    changed)."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"
