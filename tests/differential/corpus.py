"""The generated corpus of the differential tests: annotation texts and runtime/TrainJob pairs.

Annotation texts are built as raw JSON text, so that duplicate keys survive and keys can be
spelled any way GKE's Go decoder folds (case, the Kelvin sign, the long s) or does not (dotless
and dotted i), or written with JSON escapes. Objects are realistic Trainer runtimes and TrainJobs
whose patches carry strategic-merge directives at every level of the path to a wired template's
annotations and elsewhere, nulls, ancestor labels and job names in any combination.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Final, TypeVar

from hypothesis import strategies as st

from tests.builders import (
    DEFAULT_INTERFACE,
    GPU_NICS,
    INTERFACES,
    PAIRS,
    RECIPE_BOUND,
    TCPXO_RUNTIME,
    TRAINER_API,
    annotation,
)

ANCESTOR: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
FIELDS: Final = ("interfaceName", "network", "interface")
# Go's encoding/json matches a key to a field with Unicode simple folding: these fold onto ASCII
# letters of the field names; dotless and dotted i do not (they are in the corpus to prove it).
FOLDING: Final = {"k": "\u212a", "K": "\u212a", "s": "\u017f", "S": "\u017f"}
NOT_FOLDING: Final = {"i": "\u0131", "I": "\u0130"}
JOB_NAMES: Final = ("node", "launcher", "worker")
GOOD: Final = annotation()
DRIFTED: Final = annotation([*PAIRS[:3], ("eth4", GPU_NICS[5]), *PAIRS[4:5], ("eth6", GPU_NICS[3])])
UNKNOWN_NETWORK: Final = "no-such-net"


T = TypeVar("T")


@functools.cache
def _below(bound: int) -> st.SearchStrategy[int]:
    """``0 <= i < bound``. Strategies are built once: building one costs more than a draw."""
    return st.integers(0, bound - 1)


def one_in(draw: st.DrawFn, n: int) -> bool:
    """True one time in ``n``; False is the simpler case, what shrinking moves towards."""
    return draw(_below(n)) == n - 1


def pick(draw: st.DrawFn, *options: T) -> T:
    """One of ``options``; shrinks towards the first."""
    return options[draw(_below(len(options)))]


# --- Annotation texts --------------------------------------------------------------------------


@st.composite
def spellings(draw: st.DrawFn, field: str) -> str:
    """``field`` as written, or in another case, folded or not-folded letters, or unrelated."""
    how = pick(draw, "exact", "case", "upper", "fold", "no-fold", "unrelated")
    if how == "case":
        flips = draw(st.lists(st.booleans(), min_size=len(field), max_size=len(field)))
        return "".join(c.swapcase() if flip else c for c, flip in zip(field, flips, strict=True))
    if how == "upper":
        return field.upper()
    if how in ("fold", "no-fold"):
        table = FOLDING if how == "fold" else NOT_FOLDING
        spots = [i for i, c in enumerate(field) if c in table or c.swapcase() in table]
        if spots:
            i = pick(draw, *spots)
            c = field[i] if field[i] in table else field[i].swapcase()
            return field[:i] + table[c] + field[i + 1 :]
    if how == "unrelated":
        return pick(draw, f"{field}s", f" {field}", f"x-{field}", field[:-1])
    return field


@st.composite
def key_texts(draw: st.DrawFn, key: str) -> str:
    """A JSON string literal of ``key``: plain, ASCII-escaped, or one letter as a \\u escape."""
    how = pick(draw, "plain", "plain", "ascii", "escape")
    if how == "escape" and key:
        i = draw(_below(len(key)))
        escaped = f"\\u{ord(key[i]):04x}" if ord(key[i]) < 0x10000 else key[i]
        return '"' + json.dumps(key[:i])[1:-1] + escaped + json.dumps(key[i + 1 :])[1:-1] + '"'
    return json.dumps(key, ensure_ascii=how == "ascii")


value_texts: st.SearchStrategy[str] = st.sampled_from(
    [json.dumps(n) for n in (*GPU_NICS, UNKNOWN_NETWORK, "default", "", "eth9")]
    + ["null", "7", "{}", '"\\ud800"', '"eth\\u001b[31m"']
)
"""Values of the extra keys: Networks (known and not), empty, null, not strings, escapes."""


@st.composite
def entry_texts(draw: st.DrawFn, name: str, network: str) -> str:
    """One interface entry as JSON text; near ``{"interfaceName":name,"network":network}``."""
    pairs: list[tuple[str, str]] = [
        ("interfaceName", json.dumps(name)),
        ("network", json.dumps(network)),
    ]
    if one_in(draw, 2):  # respell one of the entry's own keys
        i = draw(_below(2))
        pairs[i] = (draw(spellings(pairs[i][0])), pairs[i][1])
    for _ in range(draw(_below(3))):  # shadow or duplicate keys, anywhere
        extra = (draw(spellings(pick(draw, *FIELDS))), draw(value_texts))
        pairs.insert(draw(_below(len(pairs) + 1)), extra)
    if one_in(draw, 2):
        pairs = draw(st.permutations(pairs))
    return "{" + ",".join(f"{draw(key_texts(k))}:{v}" for k, v in pairs) + "}"


secondary_pairs: st.SearchStrategy[list[tuple[str, str]]] = st.one_of(
    st.just(list(PAIRS)),
    st.permutations(PAIRS).map(list),
    st.lists(st.sampled_from(PAIRS), max_size=9),
    st.just([*PAIRS[:3], ("eth4", UNKNOWN_NETWORK), *PAIRS[4:]]),
    # A lone surrogate (an escape in the JSON text): Go decodes it as U+FFFD.
    st.just([*PAIRS[:1], ("\ud800", GPU_NICS[1]), ("eth3", "gpu-\udfff")]),
)


@st.composite
def annotation_texts(draw: st.DrawFn) -> str:
    """An interfaces annotation value: eth0 then secondaries, up to three entries respelled."""
    pairs = [("eth0", "default"), *draw(secondary_pairs)]
    mutated = draw(st.sets(st.integers(0, len(pairs) - 1), max_size=3))
    entries = [
        draw(entry_texts(name, net))
        if i in mutated
        else json.dumps({"interfaceName": name, "network": net})
        for i, (name, net) in enumerate(pairs)
    ]
    return "[" + pick(draw, ",", ", ", ",\n").join(entries) + "]"


def _respelled(position: int, extra: str) -> str:
    """GOOD with ``extra`` (raw JSON members) added to entry ``position``."""
    entries = json.loads(GOOD)
    texts = [json.dumps(entry) for entry in entries]
    texts[position] = texts[position][:-1] + ", " + extra + "}"
    return "[" + ", ".join(texts) + "]"


INTERFACES_VALUES: Final = (
    GOOD,
    GOOD,
    DRIFTED,
    annotation([*PAIRS[:3], ("eth4", UNKNOWN_NETWORK), *PAIRS[4:]]),
    _respelled(4, f'"Network": "{UNKNOWN_NETWORK}"'),
    _respelled(4, f'"networ\u212a": "{UNKNOWN_NETWORK}"'),
    _respelled(4, f'"network": "{UNKNOWN_NETWORK}"'),
    _respelled(4, '"NETWORK": null'),
    _respelled(4, '"x-network": "x"'),
    "[]",
    "not json",
)
"""Interfaces annotation values of the object corpus: the recipe's wiring, drifted, naming an
unknown Network, shadowed by a folded or repeated key (annotation texts get their own, wider
corpus in the parse test)."""
interfaces_values: st.SearchStrategy[str] = st.sampled_from(INTERFACES_VALUES)


# --- Runtimes ----------------------------------------------------------------------------------


def job(
    name: str, *, labels: dict[str, object] | None, annotations: dict[str, object]
) -> dict[str, object]:
    """A replicatedJob with a ``node`` container (what Trainer's runtimes run)."""
    template: dict[str, object] = {
        "spec": {
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {"containers": [{"name": "node", "image": "trainer:latest"}]},
            }
        }
    }
    if labels is not None:
        template["metadata"] = {"labels": labels}
    return {"name": name, "replicas": 1, "template": template}


def pod_annotations(draw: st.DrawFn) -> dict[str, object]:
    found: dict[str, object] = {}
    if not one_in(draw, 6):  # mostly the recipe's wiring, else any of the pool
        found[INTERFACES] = pick(draw, *INTERFACES_VALUES) if one_in(draw, 4) else GOOD
    default = pick(draw, "eth0", "eth1", None) if one_in(draw, 4) else "eth0"
    if default is not None:
        found[DEFAULT_INTERFACE] = default
    if one_in(draw, 2):
        found["example.com/team"] = "a"
    return found


_JOB_SETS: Final = st.lists(st.sampled_from(JOB_NAMES), min_size=1, max_size=3, unique=True)


@st.composite
def runtimes(draw: st.DrawFn) -> dict[str, object]:
    """A ClusterTrainingRuntime: node/launcher/worker jobs, any labelled as the trainer ancestor."""
    names = draw(_JOB_SETS)
    if "node" not in names and not one_in(draw, 4):  # Trainer's runtimes all have one
        names.insert(draw(_below(len(names) + 1)), "node")
    jobs = []
    for name in names:
        label = pick(draw, "trainer", "trainer", None, "model-initializer", "Trainer")
        labels: dict[str, object] | None = None if label is None else {ANCESTOR: label}
        jobs.append(job(name, labels=labels, annotations=pod_annotations(draw)))
    binding = pick(draw, "name", "label", "none")
    metadata: dict[str, object] = {"name": TCPXO_RUNTIME if binding == "name" else "custom"}
    if binding == "label":
        metadata["labels"] = {RECIPE_BOUND: "true"}
    policy = pick(draw, "torch", "mpi-launcher-as-node", "mpi")
    ml: dict[str, object] = {"numNodes": 2}
    if policy == "torch":
        ml["torch"] = {"numProcPerNode": "auto"}
    else:
        ml["mpi"] = {"runLauncherAsNode": policy == "mpi-launcher-as-node"}
    return {
        "apiVersion": TRAINER_API,
        "kind": "ClusterTrainingRuntime",
        "metadata": metadata,
        "spec": {"mlPolicy": ml, "template": {"spec": {"replicatedJobs": jobs}}},
    }


# --- Directives and patches --------------------------------------------------------------------

MAP_DIRECTIVES: Final = (
    ("$patch", "delete"),
    ("$patch", "replace"),
    ("$patch", "merge"),
    ("$retainKeys", "example.com/team"),
    ("$setElementOrder/containers", "node"),
    ("$deleteFromPrimitiveList/finalizers", "x"),
)
"""Directives as keys of a string map (annotations, labels, nodeSelector): the only place the
v2.3 CRD's structural schema lets them reach admission."""
OBJECT_DIRECTIVES: Final = (
    ("$patch", "delete"),
    ("$patch", "replace"),
    ("$patch", "merge"),
    ("$retainKeys", ["metadata"]),
    ("$setElementOrder/replicatedJobs", [{"name": "node"}]),
    ("$deleteFromPrimitiveList/finalizers", ["x"]),
)
"""Directives as fields of an object or items of a list: pruned by the v2.3 CRD's schema (and
dropped by Trainer's typed decoding), present only in files given to ``check``."""


def maybe_directive(draw: st.DrawFn, target: dict[str, object], *, in_map: bool) -> None:
    """Sometimes (one in eight) put one directive into ``target``."""
    if one_in(draw, 8):
        key, value = pick(draw, *(MAP_DIRECTIVES if in_map else OBJECT_DIRECTIVES))
        target[key] = value


def patch_annotations(draw: st.DrawFn) -> dict[str, object] | None:
    """A patch's pod annotations: wiring keys (values, nulls), other keys, a directive."""
    if one_in(draw, 10):
        return None
    found: dict[str, object] = {}
    if one_in(draw, 2):
        found[INTERFACES] = GOOD if one_in(draw, 2) else pick(draw, None, *INTERFACES_VALUES)
    if one_in(draw, 4):
        found[DEFAULT_INTERFACE] = pick(draw, "eth0", "eth1", None)
    if one_in(draw, 2):
        found["example.com/team"] = pick(draw, "b", None)
    maybe_directive(draw, found, in_map=True)
    return found


def patch_labels(draw: st.DrawFn) -> dict[str, object] | None:
    """A patch's Job-template labels: the trainer ancestor label set, changed or removed."""
    choice = draw(_below(6))
    if choice == 0:
        return {ANCESTOR: "trainer"}
    if choice == 1:
        return {ANCESTOR: pick(draw, "dataset-initializer", "Trainer", None)}
    if choice == 2:
        found: dict[str, object] = {"example.com/team": "b"}
        maybe_directive(draw, found, in_map=True)
        return found
    return None


def pod_spec_patches(draw: st.DrawFn) -> dict[str, object] | None:
    """Elsewhere in the pod: a container's env (list items, directives) and nodeSelector."""
    choice = draw(_below(4))
    if choice == 0:
        env: dict[str, object] = {"name": "NCCL_DEBUG", "value": "INFO"}
        maybe_directive(draw, env, in_map=False)
        container: dict[str, object] = {"name": "node", "env": [env]}
        maybe_directive(draw, container, in_map=False)
        return {"containers": [container]}
    if choice == 1:
        selector: dict[str, object] = {"pool": "a"}
        maybe_directive(draw, selector, in_map=True)
        return {"nodeSelector": selector}
    return None


def job_patches(draw: st.DrawFn, jobs: Sequence[str]) -> dict[str, object]:
    """A runtimePatches replicatedJob entry, directives possible at every level of the path;
    mostly for one of the runtime's ``jobs``."""
    name = pick(draw, *jobs, *jobs, *JOB_NAMES, "extra")
    metadata: dict[str, object] = {}
    annotations = patch_annotations(draw)
    if annotations is not None or one_in(draw, 2):
        metadata["annotations"] = annotations
    maybe_directive(draw, metadata, in_map=False)
    # A null at any level of the path is pruned by the apiserver and changes nothing.
    pod: dict[str, object] = {"metadata": None if one_in(draw, 16) else metadata}
    spec = pod_spec_patches(draw)
    if spec is not None:
        pod["spec"] = spec
    maybe_directive(draw, pod, in_map=False)
    job_spec: dict[str, object] = {"template": pod}
    maybe_directive(draw, job_spec, in_map=False)
    template: dict[str, object] = {"spec": job_spec}
    labels = patch_labels(draw)
    if labels is not None:
        template["metadata"] = {"labels": labels}
    maybe_directive(draw, template, in_map=False)
    entry: dict[str, object] = {"name": name, "template": template}
    maybe_directive(draw, entry, in_map=False)
    return entry


def runtime_patches(draw: st.DrawFn, count: int, runtime_jobs: Sequence[str]) -> dict[str, object]:
    jobs: list[dict[str, object]] = []
    for _ in range(1 + draw(_below(2))):
        entry = job_patches(draw, runtime_jobs)
        if all(entry["name"] != other["name"] for other in jobs):  # a list map keyed by name
            jobs.append(entry)
    spec: dict[str, object] = {"replicatedJobs": jobs}
    maybe_directive(draw, spec, in_map=False)
    template: dict[str, object] = {"spec": spec}
    if one_in(draw, 6):  # JobSet-level metadata reaches the JobSet, not the pods
        template["metadata"] = {"annotations": {INTERFACES: pick(draw, *INTERFACES_VALUES)}}
    return {
        "manager": f"example.com/manager-{count}",
        "trainingRuntimeSpec": {"template": template},
    }


def overrides(draw: st.DrawFn, jobs: Sequence[str]) -> dict[str, object]:
    """A Trainer v2.1 podTemplateOverrides entry, mostly for the runtime's ``jobs``."""
    targets = [pick(draw, *jobs, *jobs, *JOB_NAMES, "extra")]
    if one_in(draw, 3):
        other = pick(draw, *jobs, *JOB_NAMES, "extra")
        targets += [] if other in targets else [other]
    found: dict[str, object] = {"targetJobs": [{"name": t} for t in targets]}
    metadata: dict[str, object] = {}
    annotations = patch_annotations(draw)
    if annotations is not None or one_in(draw, 2):
        metadata["annotations"] = annotations
    labels = patch_labels(draw)
    if labels is not None:
        metadata["labels"] = labels
    maybe_directive(draw, metadata, in_map=False)
    found["metadata"] = metadata
    spec = pod_spec_patches(draw)
    if spec is not None:
        found["spec"] = spec
    return found


@st.composite
def trainjobs(
    draw: st.DrawFn, runtime_name: str, trainer: str, jobs: Sequence[str] = JOB_NAMES
) -> dict[str, object]:
    """A TrainJob naming ``runtime_name`` with 0-3 runtimePatches (v2.3) or overrides (v2.1),
    mostly for the runtime's ``jobs``."""
    spec: dict[str, object] = {"runtimeRef": {"name": runtime_name}}
    count = pick(draw, 1, 2, 3, 0)
    if trainer == "v2.3":
        spec["runtimePatches"] = [runtime_patches(draw, i, jobs) for i in range(count)]
    else:
        spec["podTemplateOverrides"] = [overrides(draw, jobs) for _ in range(count)]
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": {"name": "job", "namespace": "team"},
        "spec": spec,
    }


def pruned(value: object) -> object:
    """``value`` without null map values: what the apiserver admits (it prunes them first)."""
    if isinstance(value, dict):
        return {k: pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [pruned(item) for item in value]
    return value
