"""Trainer's effective wiring of a TrainJob against the wiring nicguard judges (docs/rules.md).

For every generated runtime and TrainJob, the Go oracle computes what Trainer builds: the wired
templates Trainer's plugins pick (the ``node`` job, every job labelled
``trainer.kubeflow.org/trainjob-ancestor-step: trainer``, ``launcher`` when
``mlPolicy.mpi.runLauncherAsNode``) and their pod annotations after the TrainJob's
``runtimePatches`` (Trainer v2.3.0's ``mergeRuntimePatches``: ``StrategicMergePatch`` over
``JobSetSpec`` in list order, then the runtime's job order restored) or its
``podTemplateOverrides`` (Trainer v2.1.0's ``mergePodTemplateOverrides``: ``StrategicMergePatch``
over each targeted ``PodTemplateSpec``, reproduced field for field in tests/oracle/main.go since
both versions share a module path; ``strategicpatch`` is the same code in the apimachinery
v0.34.1 that v2.1.0 pins as in v0.36.2). The property, for each case:

- nicguard denies the TrainJob, or
- Trainer cannot build it (the merge fails: nothing runs), or
- the wiring nicguard judged (``job_templates`` with the jobs the patches label, and
  ``trainjob_wiring``) equals the oracle's for
  every job Trainer wires and every other job whose merged pod annotations carry the interfaces
  annotation (an annotated job: JobSet runs its pods too; nicguard may judge more: a job whose
  ancestor label a patch's labels directive removes is still judged, which is stricter), and
  nicguard allows a runtime whose wired and annotated templates carry exactly the oracle's
  effective annotations and labels. Allowing what the oracle's wiring would deny is a fail-open.

The runtime on its own is held to the same property. Nulls: the apiserver prunes null map values
before admission (and Trainer decodes into ``map[string]string``), so the oracle is fed the objects
with nulls pruned; nicguard judges them as written, where a null must change nothing. Objects
are decoded as Trainer's client decodes what the apiserver stored (case-sensitive, unknown fields
dropped, as the CRD's structural schema prunes them): a directive that is an object field reaches
Trainer nowhere, and nicguard may refuse it in files. A TrainJob whose patches append a job to
the JobSet (a name the runtime lacks; Trainer's webhook checks patched names after the merge, so
it passes) is compared on the runtime's jobs only: a patch cannot give the appended job a
container image, so no pod of it runs, and no runtime carries it for the verdict comparison.

Pinned upstream (tests/oracle/go.mod, go.sum): github.com/kubeflow/trainer/v2 v2.3.0,
sigs.k8s.io/jobset v0.12.0, k8s.io/apimachinery and k8s.io/api v0.36.2 (the versions Trainer
v2.3.0's go.mod pins), Go 1.26.8. To move a pin: edit tests/oracle/go.mod (take apimachinery and
jobset from the new Trainer's go.mod), run ``go mod tidy`` there, commit go.mod and go.sum, and
re-read ``mergeRuntimePatches`` in the new tag's pkg/runtime/core/trainingruntime.go against the
copy in tests/oracle/main.go; scripts/oracle-bin.sh rebuilds on the next run.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Final

import pytest
from hypothesis import given, settings, strategies as st

from app.domain.cluster import ClusterView
from app.domain.evaluate import evaluate
from app.domain.kinds import Kind
from app.domain.policy import Policy
from app.domain.template import PodTemplate, job_templates, wired_jobs, wired_templates
from app.domain.verdict import Code, Verdict
from app.domain.wiring import patched_ancestors, template_wiring, trainjob_wiring
from tests.builders import DEFAULT_INTERFACE, INTERFACES, review, snapshot
from tests.differential.corpus import ANCESTOR, pruned, runtimes, trainjobs
from tests.differential.oracle import Effective, Oracle, WiredJob
from tests.support.examples import examples

POLICY = Policy()
Wiring = dict[str, tuple[object, object]]
"""Job name -> (interfaces annotation, default-interface annotation); None when absent."""


def _jobs(runtime: Mapping[str, object]) -> list[dict[str, object]]:
    spec = runtime["spec"]
    assert isinstance(spec, dict)
    jobs = spec["template"]["spec"]["replicatedJobs"]
    assert isinstance(jobs, list)
    return jobs


def _oracle_wiring(wired: tuple[WiredJob, ...], runtime: Mapping[str, object]) -> Wiring:
    known = {job["name"] for job in _jobs(runtime)}
    return {
        job.name: (
            (job.annotations or {}).get(INTERFACES),
            (job.annotations or {}).get(DEFAULT_INTERFACE),
        )
        for job in wired
        if job.name in known
    }


def _judged_runtime_wiring(runtime: object) -> Wiring:
    return {
        t.job: template_wiring(t).fingerprint()
        for t in wired_templates(runtime)
        if isinstance(t, PodTemplate)
    }


def _judged_trainjob_wiring(view: ClusterView, trainjob: Mapping[str, object], name: str) -> Wiring:
    """The wiring nicguard judges for ``trainjob``, from the runtime as its view holds it: its
    wired templates, and every other job its effective annotations make annotated."""
    runtime = view.runtime(Kind.CLUSTER_TRAINING_RUNTIME, "team", name)
    assert isinstance(runtime, Mapping)
    templates = job_templates(runtime, ancestors=patched_ancestors(trainjob))
    judged = {
        t.job: trainjob_wiring(trainjob, t, t.job).fingerprint()
        for t in templates.wired
        if isinstance(t, PodTemplate)
    }
    for t in templates.others:
        wiring = trainjob_wiring(trainjob, t, t.job)
        if wiring.wired:
            judged[t.job] = wiring.fingerprint()
    return judged


def _carrying(runtime: Mapping[str, object], wired: tuple[WiredJob, ...]) -> dict[str, object]:
    """``runtime`` with its wired templates carrying exactly the oracle's annotations and
    ancestor labels: the object whose verdict nicguard's verdict on the TrainJob must match."""
    found = copy.deepcopy(dict(runtime))
    by_name = {job.name: job for job in wired}
    for job in _jobs(found):
        template = job["template"]
        assert isinstance(template, dict)
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        oracle_job = by_name.get(str(job["name"]))
        if oracle_job is not None and "ancestor-label" in oracle_job.reasons:
            labels[ANCESTOR] = "trainer"
        elif labels.get(ANCESTOR) == "trainer":
            del labels[ANCESTOR]
        template["metadata"] = {"labels": labels}
        pod = template["spec"]["template"]
        pod["metadata"] = {"annotations": dict(oracle_job.annotations or {}) if oracle_job else {}}
    return found


def _explain(kind: str, verdict: Verdict, ours: Wiring, theirs: Wiring, *objects: object) -> str:
    shown = "\n".join(repr(o) for o in objects)
    return (
        f"{kind}\nnicguard judged: {ours}\nTrainer builds:  {theirs}\n"
        f"nicguard's verdict: allowed={verdict.allowed} {[v.code for v in verdict.violations]}\n"
        f"{shown}"
    )


def _assert_judged(
    ours: Wiring, theirs: Wiring, seen: Counter[str], verdict: Verdict, *objects: object
) -> None:
    """Every job Trainer wires is judged, with Trainer's annotations. nicguard may judge more
    (a job a patch's labels directive unlabels): stricter, never a fail-open; counted."""
    judged = {job: wiring for job, wiring in ours.items() if job in theirs}
    assert judged == theirs, _explain("wiring differs", verdict, ours, theirs, *objects)
    if len(ours) > len(theirs):
        seen["nicguard judges more jobs than Trainer wires"] += 1


_PATCH_SPEC: Final = ("trainingRuntimeSpec", "template", "spec")
_TO_ANNOTATIONS: Final = ("template", "spec", "template", "metadata", "annotations")
# A wired job's Job-template labels say it runs the trainer (the ancestor label).
_TO_LABELS: Final = ("template", "metadata", "labels")
Path = tuple[str | int, ...]


def _directives(value: object, path: Path = ()) -> Iterator[Path]:
    """The path of every ``$`` key in ``value``."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key.startswith("$"):
                yield (*path, key)
            yield from _directives(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _directives(item, (*path, index))


def _on_wired_path(path: Path, trainjob: Mapping[str, object], wired: set[str]) -> bool:
    """docs/rules.md, PatchDirectiveUnsupported: from a patch's ``template.spec`` down to a
    wired template's annotations (the replicatedJobs list, the wired entry, its template, spec,
    template, metadata, annotations), a wired entry's Job-template metadata and labels (where
    its ancestor label lives), and ``podTemplateOverrides[*].metadata`` (and its annotations)
    of a wired job."""
    at, key = path[:-1], path[-1]
    assert isinstance(key, str)
    spec = trainjob["spec"]
    assert isinstance(spec, dict)
    if at[:1] == ("spec",) and at[1:2] == ("runtimePatches",):
        rest = at[3:]
        if rest[: len(_PATCH_SPEC)] != _PATCH_SPEC:
            return False
        rest = rest[len(_PATCH_SPEC) :]
        if not rest:
            return True
        if rest[0] != "replicatedJobs":
            return False
        patch = spec["runtimePatches"][at[2]]
        entry = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][rest[1]]
        name = entry.get("name")
        tail = rest[2:]
        on_path = tail in (_TO_ANNOTATIONS[: len(tail)], _TO_LABELS[: len(tail)])
        return not isinstance(name, str) or (name in wired and on_path)
    override = spec["podTemplateOverrides"][at[2]]
    targets = {t.get("name") for t in override.get("targetJobs") or ()}
    return bool(targets & wired) and at[3:] in (("metadata",), ("metadata", "annotations"))


def _labelled_by_patches(trainjob: Mapping[str, object]) -> set[str]:
    spec = trainjob["spec"]
    assert isinstance(spec, dict)
    return {
        str(job.get("name"))
        for patch in spec.get("runtimePatches") or ()
        for job in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        if (((job.get("template") or {}).get("metadata") or {}).get("labels") or {}).get(ANCESTOR)
        == "trainer"
    }


def _annotated(runtime: Mapping[str, object], trainjob: Mapping[str, object]) -> set[str]:
    """The jobs whose pod annotations carry the interfaces key in the runtime or a patch."""

    def carries(job: object, *path: str) -> bool:
        found: object = job
        for step in path:
            found = found.get(step) if isinstance(found, dict) else None
        return isinstance(found, dict) and INTERFACES in found

    names = {str(job.get("name")) for job in _jobs(runtime) if carries(job, *_TO_ANNOTATIONS)}
    spec = trainjob["spec"]
    assert isinstance(spec, dict)
    for patch in spec.get("runtimePatches") or ():
        jobs = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        names |= {str(job.get("name")) for job in jobs if carries(job, *_TO_ANNOTATIONS)}
    for override in spec.get("podTemplateOverrides") or ():
        if carries(override, "metadata", "annotations"):
            names |= {str(t.get("name")) for t in override.get("targetJobs") or ()}
    return names


def _refusals_on_the_path(
    verdict: Verdict,
    runtime: Mapping[str, object],
    trainjob: Mapping[str, object],
    answer: Effective,
    seen: Counter[str],
) -> None:
    """``PatchDirectiveUnsupported`` only for a directive on the way to a wired template's
    annotations; directives elsewhere (containers, nodeSelector, labels, other jobs) pass."""
    # A job the runtime lacks receives nothing: refusing a directive aimed at it by a wired
    # name (node; launcher when it runs ranks) is harmless; so is one aimed at a job a patch
    # labels as the trainer when the merge fails (the oracle then wires nothing).
    wired = {job.name for job in (*answer.runtime, *answer.effective)} | set(wired_jobs(runtime))
    wired |= _labelled_by_patches(trainjob)
    # Annotated jobs (docs/rules.md): the runtime's, Trainer's after the merge, and those a
    # patch or override gives the interfaces annotation.
    wired |= {job.name for job in answer.annotated} | _annotated(runtime, trainjob)
    found = list(_directives(trainjob))
    on_path = [path for path in found if _on_wired_path(path, trainjob, wired)]
    refused = any(v.code is Code.PATCH_DIRECTIVE_UNSUPPORTED for v in verdict.violations)
    if found and not on_path:
        assert not refused, f"a directive off the wired path refused: {found}\n{trainjob}"
        seen["directives only elsewhere, not refused"] += 1


def _check(
    oracle: Oracle,
    runtime: dict[str, object],
    trainjob: dict[str, object],
    trainer: str,
    seen: Counter[str],
) -> None:
    answer: Effective = oracle.effective(pruned(runtime), pruned(trainjob), trainer)
    assert not (answer.error or "").startswith("runtime"), answer.error
    # The runtime on its own: nicguard allows it only reading Trainer's wired templates.
    own = evaluate(review(runtime), snapshot(), POLICY)
    if own.allowed:
        ours, theirs = _judged_runtime_wiring(runtime), _oracle_wiring(answer.runtime, runtime)
        _assert_judged(ours, theirs, seen, own, runtime)
    # The TrainJob.
    view = snapshot(runtime)
    verdict = evaluate(review(trainjob), view, POLICY)
    _refusals_on_the_path(verdict, runtime, trainjob, answer, seen)
    if answer.error is not None:
        seen["Trainer cannot build it"] += 1
        return
    if not verdict.allowed:
        seen["nicguard denies"] += 1
        return
    name = str(trainjob["spec"]["runtimeRef"]["name"])  # type: ignore[index]
    ours = _judged_trainjob_wiring(view, trainjob, name)
    theirs = _oracle_wiring((*answer.effective, *answer.annotated), runtime)
    # A job the patches append (a name the runtime lacks) has no container image, so no pod of
    # it runs, and no runtime carries it: only the runtime's jobs are compared then.
    appended = set(answer.jobs) - {job["name"] for job in _jobs(runtime)}
    if not appended:
        built = _carrying(runtime, (*answer.effective, *answer.annotated))
        on_theirs = evaluate(review(built), snapshot(), POLICY)
        assert on_theirs.allowed, _explain(
            "FAIL-OPEN: nicguard allows the TrainJob, Trainer's wiring is denied",
            on_theirs,
            ours,
            theirs,
            runtime,
            trainjob,
        )
    _assert_judged(ours, theirs, seen, verdict, runtime, trainjob)
    if appended:
        seen["allowed, the patches append a job"] += 1
        return
    seen["allowed, same wiring"] += 1
    if answer.annotated:
        seen["allowed, an annotated job judged alike"] += 1
    if answer.unwired:
        seen["allowed, the patch unwires a job"] += 1


@pytest.mark.parametrize(("trainer", "full"), [("v2.3", 2000), ("v2.1", 800)], ids=["v2.3", "v2.1"])
def test_nicguard_judges_the_wiring_trainer_builds(oracle: Oracle, trainer: str, full: int) -> None:
    seen: Counter[str] = Counter()
    count = examples(full)

    @settings(max_examples=count)
    @given(st.data())
    def agrees(data: st.DataObject) -> None:
        runtime = data.draw(runtimes(), label="runtime")
        name = runtime["metadata"]["name"]  # type: ignore[index]
        jobs = tuple(str(job["name"]) for job in _jobs(runtime))
        trainjob = data.draw(trainjobs(str(name), trainer, jobs), label="trainjob")
        _check(oracle, runtime, trainjob, trainer, seen)

    agrees()
    print(f"\neffective differential ({trainer}): {dict(seen)}")  # noqa: T201 - with -s
    assert seen["allowed, same wiring"] >= count // 10, seen
    assert seen["nicguard denies"] >= count // 10, seen
    assert seen["directives only elsewhere, not refused"] >= count // 50, seen
    assert seen["allowed, an annotated job judged alike"] >= count // 50, seen
