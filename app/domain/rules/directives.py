"""PatchDirectiveUnsupported: strategic-merge directives in a TrainJob's patches on the way to a
wired template's annotations (docs/rules.md).

Trainer applies ``runtimePatches`` as a strategic merge patch of the JobSet spec: a ``$`` key can
remove or replace a wired job's annotations, or the job itself, without naming the wiring.
nicguard does not compute directives; it refuses them where they can reach the wiring.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Final

from app.domain.fields import FieldPath, JsonMap, as_list, as_map, value_at
from app.domain.verdict import Code, Violation, shown

_PATCHES: Final = FieldPath("spec.runtimePatches")
_OVERRIDES: Final = FieldPath("spec.podTemplateOverrides")
_PATCH: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_SET_ORDER: Final = "$setElementOrder/"
_DELETE_FROM_LIST: Final = "$deleteFromPrimitiveList/"
# From a patched replicatedJob down to its pod annotations: each step and what it holds.
_WIRED_STEPS: Final = (
    ("template", "Job template"),
    ("spec", "Job spec"),
    ("template", "pod template"),
    ("metadata", "pod metadata"),
    ("annotations", "pod annotations"),
)


@dataclass(frozen=True, slots=True)
class Directive:
    """A ``$`` key in a patch, where it is, and what it acts on (in words)."""

    path: FieldPath
    key: str
    value: object
    target: str
    merge: str

    def fingerprint(self) -> tuple[str, str, str]:
        # What UPDATE grandfathering compares: changing a directive changes the wiring.
        return str(self.path), self.key, repr(self.value)


def patch_directives(trainjob: object, wired_jobs: Collection[str]) -> tuple[Directive, ...]:
    """Every directive of the TrainJob's patches that can reach a wired job's annotations."""
    return (
        *_runtime_patch_directives(trainjob, wired_jobs),
        *_override_directives(trainjob, wired_jobs),
    )


def directive_violation(directive: Directive) -> Violation:
    value = directive.value
    shown_value = f": {shown(value)}" if isinstance(value, str) else ""
    labels = directive.target.endswith("labels")
    included = "the trainer-ancestor label" if labels else "wiring"
    explicit = "labels" if labels else "annotation values"
    return Violation(
        code=Code.PATCH_DIRECTIVE_UNSUPPORTED,
        field=str(directive.path),
        message=f'"{shown(directive.key)}{shown_value}" is a strategic-merge directive: '
        f"{directive.merge} would {_effect(directive)}, {included} included. nicguard does "
        f"not compute directives; set the {explicit} explicitly instead",
    )


def _effect(directive: Directive) -> str:
    key, target = directive.key, directive.target
    if key == _PATCH and directive.value == "delete":
        return f"remove {target}"
    if key == _PATCH and directive.value == "replace":
        return f"replace {target} by the patch's"
    if key == _RETAIN_KEYS:
        return f"drop what {target} hold that it does not list"
    if key.startswith(_SET_ORDER):
        return f"reorder the list {shown(key[len(_SET_ORDER) :])} of {target}"
    if key.startswith(_DELETE_FROM_LIST):
        return f"delete values from the list {shown(key[len(_DELETE_FROM_LIST) :])} of {target}"
    return f"read it as a directive on {target}"


_TRAINER_MERGE: Final = "Trainer's merge of runtimePatches"


def _runtime_patch_directives(trainjob: object, wired: Collection[str]) -> Iterator[Directive]:
    for i, patch in enumerate(as_list(value_at(trainjob, "spec", "runtimePatches")) or ()):
        spec = as_map(value_at(patch, "trainingRuntimeSpec", "template", "spec"))
        if spec is None:
            continue
        path = _PATCHES.index(i).child("trainingRuntimeSpec.template.spec")
        yield from _directives(spec, path, "the JobSet spec, every replicatedJob", _TRAINER_MERGE)
        jobs = spec.get("replicatedJobs")
        jobs_path = path.child("replicatedJobs")
        listed = as_list(jobs)
        if listed is None:
            yield from _directives(jobs, jobs_path, "the replicatedJobs list", _TRAINER_MERGE)
            continue
        for j, item in enumerate(listed):
            job = as_map(item)
            if job is None:
                continue
            name = job.get("name")
            if not isinstance(name, str):
                # No merge key: a directive item of the list itself, e.g. {$patch: replace}.
                yield from _directives(
                    job, jobs_path.index(j), "the replicatedJobs list", _TRAINER_MERGE
                )
            elif name in wired:
                yield from _wired_entry(job, jobs_path.index(j), name)


def _wired_entry(job: JsonMap, path: FieldPath, name: str) -> Iterator[Directive]:
    yield from _directives(job, path, f"the {shown(name)} job", _TRAINER_MERGE)
    # The Job template's labels say which job runs the trainer (the ancestor label): a directive
    # there can take the label off the job nicguard judges as the trainer.
    metadata = value_at(job, "template", "metadata")
    metadata_path = path.child("template.metadata")
    yield from _directives(
        metadata, metadata_path, f"the {shown(name)} job's labels", _TRAINER_MERGE
    )
    yield from _directives(
        value_at(metadata, "labels"),
        metadata_path.child("labels"),
        f"the {shown(name)} job's labels",
        _TRAINER_MERGE,
    )
    level: object = job
    for step, holds in _WIRED_STEPS:
        level = as_map(level)
        level = None if level is None else level.get(step)
        path = path.child(step)
        yield from _directives(level, path, f"the {shown(name)} job's {holds}", _TRAINER_MERGE)


def _override_directives(trainjob: object, wired: Collection[str]) -> Iterator[Directive]:
    overrides = as_list(value_at(trainjob, "spec", "podTemplateOverrides"))
    for i, override in enumerate(overrides or ()):
        targets = [value_at(t, "name") for t in as_list(value_at(override, "targetJobs")) or ()]
        named = [t for t in targets if isinstance(t, str) and t in wired]
        if not named:
            continue
        jobs = ", ".join(shown(t) for t in named)
        merge = "Trainer's merge of podTemplateOverrides"
        metadata = value_at(override, "metadata")
        path = _OVERRIDES.index(i).child("metadata")
        yield from _directives(metadata, path, f"the {jobs} job's pod metadata", merge)
        yield from _directives(
            value_at(metadata, "annotations"),
            path.child("annotations"),
            f"the {jobs} job's pod annotations",
            merge,
        )


def _directives(level: object, path: FieldPath, target: str, merge: str) -> Iterator[Directive]:
    mapping = as_map(level)
    for key, value in (mapping or {}).items():
        if key.startswith("$"):
            yield Directive(path.key(key), key, value, target, merge)
