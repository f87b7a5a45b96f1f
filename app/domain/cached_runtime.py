"""What a cluster view keeps of a runtime: only the fields the rules read (SPEC section 10: RSS).

A cached runtime's whole pod template costs ~20 KB in memory; thousands of them are cached.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import lru_cache
from typing import Final

from app.domain.fields import JsonMap, as_list, as_map, map_at, value_at
from app.domain.policy import RECIPE_BOUND_LABEL
from app.domain.template import NODE_JOB
from app.domain.wiring import WIRING_KEYS

_METADATA: Final = ("name", "namespace", "resourceVersion")
_SHARED_SPECS: Final = 1024


def slim_runtime(runtime: JsonMap) -> JsonMap:
    """The runtime with identity, the recipe-bound label and the node job's wiring annotations.

    The rules see the same thing as in the whole object (``node_template``, the label, names):
    jobs before the node job stay as non-map placeholders so its position is unchanged, and
    nothing after it is kept (only the first ``node`` job is read).
    """
    metadata = map_at(runtime, "metadata") or {}
    kept: dict[str, object] = {key: metadata[key] for key in _METADATA if key in metadata}
    if "namespace" in kept:
        kept["namespace"] = _shared(kept["namespace"])
    labels = map_at(metadata, "labels")
    if labels is not None and RECIPE_BOUND_LABEL in labels:
        kept["labels"] = {RECIPE_BOUND_LABEL: _shared(labels[RECIPE_BOUND_LABEL])}
    slim: dict[str, object] = {
        key: _shared(runtime[key]) for key in ("apiVersion", "kind") if key in runtime
    }
    slim["metadata"] = kept
    jobs = as_list(value_at(runtime, "spec", "template", "spec", "replicatedJobs"))
    if jobs is not None:
        slim["spec"] = _spec(*_node_job(jobs))
    return slim


_Wiring = tuple[tuple[str, object], ...]


def _node_job(jobs: Sequence[object]) -> tuple[int, _Wiring | None]:
    """(position of the first node job or -1, its wiring or None when it has no pod template)."""
    for position, item in enumerate(jobs):
        job = as_map(item)
        if job is None or job.get("name") != NODE_JOB:
            continue
        pod_template = map_at(job, "template", "spec", "template")
        if pod_template is None:
            return position, None
        annotations = map_at(pod_template, "metadata", "annotations") or {}
        return position, tuple((key, annotations[key]) for key in WIRING_KEYS if key in annotations)
    return -1, None


def _spec(position: int, wiring: _Wiring | None) -> JsonMap:
    # Runtimes stamped from one recipe share their spec: build it once (read-only, like all
    # cached objects). Only string values are shared: True == 1 == 1.0 as cache keys, and lists
    # are not hashable, so malformed annotations are built apart.
    if wiring is None or all(type(value) is str for _, value in wiring):
        return _shared_spec(position, wiring)
    return _build_spec(position, wiring)


@lru_cache(maxsize=_SHARED_SPECS)
def _shared_spec(position: int, wiring: _Wiring | None) -> JsonMap:
    return _build_spec(position, wiring)


def _build_spec(position: int, wiring: _Wiring | None) -> JsonMap:
    jobs: list[object] = [None] * max(position, 0)
    if position >= 0:
        node: dict[str, object] = {"name": NODE_JOB}
        if wiring is not None:
            pod = {"metadata": {"annotations": dict(wiring)}}
            node["template"] = {"spec": {"template": pod}}
        jobs.append(node)
    return {"template": {"spec": {"replicatedJobs": jobs}}}


def _shared(value: object) -> object:
    """Strings repeated across thousands of runtimes (namespaces, annotations) stored once."""
    return sys.intern(value) if type(value) is str else value
