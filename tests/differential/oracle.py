"""A client of the Go oracle (tests/oracle): GKE's and Trainer's own reading of an object.

The binary is built once per checkout by ``scripts/oracle-bin.sh`` (``make oracle``) and named by
``NICGUARD_ORACLE``; it answers one JSON line per request, so thousands of cases cost little.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from typing import IO, Final

import pytest

from tests.support.paths import ROOT

MAKE_ORACLE: Final = (
    "the differential tests need the Go oracle: `make oracle` builds it into ~/.cache/nicguard "
    "(the Makefile passes it as NICGUARD_ORACLE)"
)
ORACLE_BIN: Final = ROOT / "scripts" / "oracle-bin.sh"

Entry = tuple[str, str | None, str | None]
"""``(interfaceName, network, interface)`` as GKE's InterfaceRef holds it (None: nil)."""


@dataclass(frozen=True, slots=True)
class Parsed:
    """``ParseInterfaceAnnotation``'s result: the entries (None for JSON null) and its error."""

    entries: tuple[Entry, ...] | None
    error: str | None


@dataclass(frozen=True, slots=True)
class WiredJob:
    """A replicatedJob Trainer runs training ranks in, why, and its pod-template annotations."""

    name: str
    reasons: tuple[str, ...]
    annotations: dict[str, str] | None


@dataclass(frozen=True, slots=True)
class Effective:
    """The runtime's wired jobs, the TrainJob's after Trainer's merge, or the merge's error."""

    runtime: tuple[WiredJob, ...]
    effective: tuple[WiredJob, ...]
    jobs: tuple[str, ...]
    unwired: tuple[str, ...]
    error: str | None
    annotated: tuple[WiredJob, ...] = ()
    """Every other job after the merge whose pod annotations carry the interfaces key."""


PodClaimRef = tuple[str, str | None, str | None]
"""A pod's ``resourceClaims`` entry as ``corev1.PodResourceClaim`` holds it: ``(name,
resourceClaimTemplateName, resourceClaimName)`` (None: nil)."""
ContainerClaimRef = tuple[str, str]
"""A container's ``resources.claims`` entry as ``corev1.ResourceClaim`` holds it: ``(name,
request)``."""


@dataclass(frozen=True, slots=True)
class SnapshotJob:
    """A replicatedJob of a decoded snapshot: its Job-template labels, pod-template annotations,
    and its pod template's DRA claims: the pod's, and each (init) container's, in list order."""

    name: str
    labels: dict[str, str] | None
    annotations: dict[str, str] | None
    resource_claims: tuple[PodClaimRef, ...] = ()
    container_claims: tuple[tuple[ContainerClaimRef, ...], ...] = ()
    init_container_claims: tuple[tuple[ContainerClaimRef, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Trainer's decoding of a snapshot's ``data.runtime`` (``getRuntimeSnapshot``), or its error.

    ``runtime`` is the whole decoded copy as Go encodes the typed object (None on error)."""

    api_version: str
    kind: str
    name: str
    namespace: str
    labels: dict[str, str] | None
    run_launcher_as_node: bool | None
    wired: tuple[WiredJob, ...]
    jobs: tuple[SnapshotJob, ...]
    runtime: dict[str, object] | None
    error: str | None


@dataclass(frozen=True, slots=True)
class Patchable:
    """What Trainer v2.3.0's TrainJob type can carry: the JSON fields of the pod-spec patch a
    runtimePatch reaches and of its (init) container patches, and every path under ``spec`` typed
    as a pod's claim (``PodResourceClaim``) or a container's reference to one
    (``ResourceClaim``)."""

    pod_spec: frozenset[str]
    container: frozenset[str]
    init_container: frozenset[str]
    pod_claims: tuple[str, ...]
    container_claims: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Documents:
    """The JSON documents kubectl sends for a file, and the error it stops on (the documents
    before it are sent all the same)."""

    documents: tuple[object, ...]
    error: str | None


def oracle_path() -> str:
    """The oracle binary, or a test failure saying how to build it (never a skip)."""
    path = os.environ.get("NICGUARD_ORACLE", "")
    if not path:  # a bare `pytest`: the oracle `make` built for these sources, if there is one
        found = subprocess.run(
            [str(ORACLE_BIN)],
            capture_output=True,
            text=True,
            env={**os.environ, "NICGUARD_NO_BUILD": "1"},
            check=False,
        )
        path = found.stdout.strip()
    if not path:
        pytest.fail(f"no oracle built: {MAKE_ORACLE}", pytrace=False)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"NICGUARD_ORACLE={path} is not an executable: {MAKE_ORACLE}", pytrace=False)
    return path


class Oracle:
    """One long-lived oracle process; requests are answered in order."""

    def __init__(self, path: str) -> None:
        self._process = subprocess.Popen(
            [path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8"
        )
        self._next = 0

    def _ask(self, request: dict[str, object]) -> dict[str, object]:
        self._next += 1
        stdin, stdout = self._pipes()
        stdin.write(json.dumps({"id": self._next, **request}) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            pytest.fail(f"the oracle exited ({self._process.poll()}) on {request}")
        answer = json.loads(line)
        assert isinstance(answer, dict)
        assert answer.get("id") == self._next, answer
        return answer

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        return self._process.stdin, self._process.stdout

    def versions(self) -> dict[str, str]:
        modules = self._ask({"op": "versions"})["modules"]
        assert isinstance(modules, dict)
        return {str(k): str(v) for k, v in modules.items()}

    def parse(self, annotation: str) -> Parsed:
        answer = self._ask({"op": "parse", "annotation": annotation})
        raw = answer.get("entries")
        entries = None if raw is None else tuple(_entry(item) for item in _list(raw))
        error = answer.get("error")
        return Parsed(entries, None if error is None else str(error))

    def effective(self, runtime: object, trainjob: object, trainer: str) -> Effective:
        """``trainer`` is ``v2.3`` (runtimePatches) or ``v2.1`` (podTemplateOverrides)."""
        answer = self._ask(
            {"op": "effective", "trainer": trainer, "runtime": runtime, "trainjob": trainjob}
        )
        error = answer.get("error")
        return Effective(
            runtime=_jobs(answer.get("runtime")),
            effective=_jobs(answer.get("effective")),
            jobs=tuple(str(name) for name in _list(answer.get("jobs"))),
            unwired=tuple(str(name) for name in _list(answer.get("unwired"))),
            error=None if error is None else str(error),
            annotated=_jobs(answer.get("annotated")),
        )

    def snapshot(self, text: str) -> Snapshot:
        """Trainer v2.3.0's reading of ``text`` as a snapshot's ``data.runtime``."""
        answer = self._ask({"op": "snapshot", "yaml": text})
        error, runtime, flag = (
            answer.get("error"),
            answer.get("runtime"),
            answer.get("runLauncherAsNode"),
        )
        assert runtime is None or isinstance(runtime, dict)
        assert flag is None or isinstance(flag, bool)
        return Snapshot(
            api_version=str(answer.get("apiVersion", "")),
            kind=str(answer.get("kind", "")),
            name=str(answer.get("name", "")),
            namespace=str(answer.get("namespace", "")),
            labels=_strings(answer.get("labels")),
            run_launcher_as_node=flag,
            wired=_jobs(answer.get("wired")),
            jobs=tuple(_snapshot_job(item) for item in _list(answer.get("jobs"))),
            runtime=runtime,
            error=None if error is None else str(error),
        )

    def yaml_to_json(self, text: str) -> Documents:
        """What kubectl sends for a file holding ``text``."""
        answer = self._ask({"op": "yaml2json", "yaml": text})
        error, documents = answer.get("error"), answer.get("documents")
        return Documents(
            documents=tuple(_list(documents)),
            error=None if error is None else str(error),
        )

    def marshal(self, runtime: object) -> str:
        """The text Trainer's ``createRuntimeSnapshot`` writes for ``runtime``."""
        answer = self._ask({"op": "marshal", "runtime": runtime})
        assert "error" not in answer, answer
        text = answer["yaml"]
        assert isinstance(text, str)
        return text

    def patchable(self) -> Patchable:
        """Trainer v2.3.0's patch types, read by reflection."""
        answer = self._ask({"op": "patchable"})
        assert "error" not in answer, answer

        def names(key: str) -> tuple[str, ...]:
            return tuple(str(name) for name in _list(answer.get(key)))

        return Patchable(
            pod_spec=frozenset(names("podSpec")),
            container=frozenset(names("container")),
            init_container=frozenset(names("initContainer")),
            pod_claims=names("podClaims"),
            container_claims=names("containerClaims"),
        )

    def close(self) -> None:
        stdin, _ = self._pipes()
        stdin.close()
        self._process.wait(timeout=10)
        assert self._process.stdout is not None
        self._process.stdout.close()


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _entry(item: object) -> Entry:
    assert isinstance(item, dict)
    name, network, interface = item["interfaceName"], item["network"], item["interface"]
    assert isinstance(name, str)
    assert network is None or isinstance(network, str)
    assert interface is None or isinstance(interface, str)
    return (name, network, interface)


def _strings(value: object) -> dict[str, str] | None:
    if value is None:
        return None
    assert isinstance(value, dict)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()), value
    return dict(value)


def _snapshot_job(item: object) -> SnapshotJob:
    assert isinstance(item, dict)
    return SnapshotJob(
        name=str(item["name"]),
        labels=_strings(item.get("labels")),
        annotations=_strings(item.get("annotations")),
        resource_claims=tuple(_pod_claim(claim) for claim in _list(item.get("resourceClaims"))),
        container_claims=_containers_claims(item.get("containerClaims")),
        init_container_claims=_containers_claims(item.get("initContainerClaims")),
    )


def _optional(value: object) -> str | None:
    assert value is None or isinstance(value, str), value
    return value


def _pod_claim(item: object) -> PodClaimRef:
    assert isinstance(item, dict)
    name = item["name"]
    assert isinstance(name, str)
    template, claim = item.get("resourceClaimTemplateName"), item.get("resourceClaimName")
    return (name, _optional(template), _optional(claim))


def _containers_claims(value: object) -> tuple[tuple[ContainerClaimRef, ...], ...]:
    found = []
    for claims in _list(value):
        refs = []
        for item in _list(claims):
            assert isinstance(item, dict)
            name, request = item["name"], item.get("request", "")
            assert isinstance(name, str)
            assert isinstance(request, str)
            refs.append((name, request))
        found.append(tuple(refs))
    return tuple(found)


def _jobs(value: object) -> tuple[WiredJob, ...]:
    found = []
    for item in _list(value):
        assert isinstance(item, dict)
        annotations = item.get("annotations")
        assert annotations is None or isinstance(annotations, dict)
        found.append(
            WiredJob(
                name=str(item["name"]),
                reasons=tuple(str(r) for r in _list(item.get("reasons"))),
                annotations=None
                if annotations is None
                else {str(k): str(v) for k, v in annotations.items()},
            )
        )
    return tuple(found)
