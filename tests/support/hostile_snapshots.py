"""The costliest ``data.runtime`` texts a ConfigMap writer can send (SPEC §14: the worst accepted
input costs at most 50 ms of CPU and 16 MiB), and the reviews carrying them: shared by the unit
bound on memory, the live tests of a serving process and bench.snapshot_cost's CPU numbers."""

from __future__ import annotations

import json
from typing import Final

from app.domain.runtime_snapshot import MAX_RUNTIME_BYTES

_NAME: Final = "metadata: {name: x}\n"
_OWNER: Final = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "name": "job",
    "uid": "0b5e8f5c-2d7a-4f3e-9d1c-6a4b3c2d1e0f",
    "controller": True,
}


def _fill(head: str, unit: str, tail: str, count: int | None = None) -> str:
    """``head`` + ``unit`` repeated (``count`` times, or to the 256 KiB cap) + ``tail``."""
    if count is None:
        count = (MAX_RUNTIME_BYTES - len(head) - len(tail)) // len(unit)
    return head + unit * count + tail


def empty_maps(count: int | None = None) -> str:
    """``spec: [{},{},…]``: the reproduction of the bypass review (1 MiB there); ``count`` + 1
    maps, or as many as 256 KiB holds."""
    return _fill(_NAME + "spec: [", "{},", "{}]\n", count)


def alias_bomb(levels: int = 9) -> str:
    """Each level an anchored list of ten aliases of the one before: 10**levels values."""
    lines = [_NAME + "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def aliased_list(nodes: int, aliases: int) -> str:
    """One anchored list of ``nodes`` scalars and ``aliases`` aliases of it: a quarter of the
    values come from the text itself, so goyaml.v2's own aliasing bound lets it through."""
    items = ", ".join(["1"] * nodes)
    refs = "".join(f"b{i}: *a\n" for i in range(aliases))
    return f"{_NAME}a: &a [{items}]\n{refs}"


def claim_references(references: int) -> str:
    """A pod whose first container claims ``references`` times, its second the same list by
    alias: every value on the DRA claims path, which the typed reading walks
    (app.domain.runtime_decoding)."""
    claims = ", ".join(["{name: a}"] * references)
    containers = f"[{{resources: {{claims: &c [{claims}]}}}}, {{resources: {{claims: *c}}}}]"
    pod = "{template: {spec: {template: {spec: {containers: " + containers + "}}}}}"
    return _NAME + "spec: {template: {spec: {replicatedJobs: [" + pod + "]}}}\n"


def worst_accepted() -> dict[str, str]:
    """Texts just within the reader's budget (SNAPSHOT_LIMITS: 5,000 nodes, 10,000 values),
    each costly another way."""
    keys = 2_495
    width = (MAX_RUNTIME_BYTES - 64) // keys - 6
    return {
        "4,993 empty maps": empty_maps(4_992),
        "2,495 long keys": _NAME + "".join(f"k{i:0{width}d}: 1\n" for i in range(keys)),
        "9,977 values through aliases": aliased_list(2_490, 3),
        "one 256 KiB plain scalar": _fill(_NAME + "x: ", "1", "\n"),
        "one 256 KiB octal-looking integer": _fill(_NAME + "x: 0", "0", "\n"),
        "one 256 KiB decimal-looking float": _fill(_NAME + "x: 1", "0", ".5\n"),
        "64 levels of nesting": _NAME + "x: " + "[" * 63 + "]" * 63 + "\n",
        "1,600 claim references, aliased once": claim_references(1_600),
        "4,900 aliases 62 levels deep": _NAME
        + "a: &a 1\nx: "
        + "[" * 62
        + ", ".join(["*a"] * 4_900)
        + "]" * 62
        + "\n",
    }


def refused_for_cost() -> dict[str, str]:
    """Texts refused by a bound: the cost is what it takes to get there."""
    return {
        "256 KiB of empty maps": empty_maps(),
        "alias bomb (10**9 values)": alias_bomb(),
        "alias expansion beyond 10,000": aliased_list(2_490, 4),
        "65 levels of nesting": _NAME + "x: " + "[" * 65 + "]" * 65 + "\n",
    }


def configmap_review_body(name: str, data: dict[str, str], *, update: bool = False) -> bytes:
    """The AdmissionReview of a dry-run write of ConfigMap ``team/name`` (controlled by a
    TrainJob) holding ``data``, as the apiserver sends it; an UPDATE's oldObject is the same."""
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "team", "ownerReferences": [_OWNER]},
        "data": data,
    }
    request: dict[str, object] = {
        "uid": "5d0e1c1e-3b8a-4f0c-9a1d-2e3f4a5b6c7d",
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
        "namespace": "team",
        "name": name,
        "operation": "UPDATE" if update else "CREATE",
        "userInfo": {"username": "mallory"},
        "object": configmap,
        "dryRun": True,
    }
    if update:
        request["oldObject"] = configmap
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(body).encode()


def snapshot_review_body(runtime: str, *, update: bool = False) -> bytes:
    """A write of TrainJob team/job's runtime snapshot holding the copy ``runtime``."""
    return configmap_review_body("job-runtime-snapshot", {"runtime": runtime}, update=update)
