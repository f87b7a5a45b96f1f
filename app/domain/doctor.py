"""What ``nicguard doctor`` concludes: one line per check (✓, ✗ or !), what was found and the fix,
the exit status, and the platform's checks: the Kubernetes minor, the APIs, the Deployment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

# The Kubernetes minors nicguard is tested on (docs/doctor.md): GKE's release channels today.
TESTED_MINORS: Final = (34, 37)
EXIT_HEALTHY, EXIT_FAILING = 0, 1


class Mark(Enum):
    OK = "✓"
    WARN = "!"
    FAIL = "✗"


@dataclass(frozen=True, slots=True)
class Line:
    """One check: its mark, what it looked at, what it found and, unless ✓, what to do."""

    mark: Mark
    check: str
    found: str
    fix: str = ""

    def to_json(self) -> dict[str, str]:
        return {"status": self.mark.name.lower(), "check": self.check, "found": self.found} | (
            {"fix": self.fix} if self.fix else {}
        )


def exit_status(lines: Sequence[Line]) -> int:
    """1 when any check failed; warnings (!) leave it 0."""
    return EXIT_FAILING if any(line.mark is Mark.FAIL for line in lines) else EXIT_HEALTHY


def render_text(lines: Sequence[Line]) -> str:
    """``✓ check: found`` per line, the fix indented under each ✗ and !, then the counts."""
    out = []
    for line in lines:
        out.append(f"{line.mark.value} {line.check}: {line.found}")
        if line.fix:
            out.append(f"    fix: {line.fix}")
    counts = {mark: sum(1 for line in lines if line.mark is mark) for mark in Mark}
    out.append(f"{counts[Mark.OK]} ✓, {counts[Mark.WARN]} !, {counts[Mark.FAIL]} ✗")
    return "\n".join(out)


def minor_line(git_version: str, minor: str) -> Line:
    """The server's minor (``"37"``, or ``"37+"`` as some providers write it) against
    ``TESTED_MINORS``."""
    low, high = TESTED_MINORS
    window = f"1.{low}-1.{high}"
    digits = minor.rstrip("+")
    if not digits.isdigit():
        return Line(Mark.WARN, "Kubernetes", f"{git_version}: minor {minor!r} unknown", _UPGRADE)
    number = int(digits)
    if low <= number <= high:
        return Line(Mark.OK, "Kubernetes", f"{git_version}, within the tested {window}")
    side = "older" if number < low else "newer"
    found = f"{git_version} is {side} than the tested {window}"
    return Line(Mark.WARN, "Kubernetes", found, _UPGRADE if number < low else _NEWER)


_UPGRADE: Final = "upgrade the cluster to a minor of the tested window (docs/doctor.md)"
_NEWER: Final = "expected to work; report what differs (docs/doctor.md)"


@dataclass(frozen=True, slots=True)
class Api:
    """A group version nicguard reads, the resources it needs of it, and, when missing, how bad
    that is, what it means and the fix."""

    group_version: str
    resources: tuple[str, ...]
    mark: Mark
    meaning: str
    fix: str


APIS: Final = (
    Api(
        "networking.gke.io/v1",
        ("networks", "gkenetworkparamsets"),
        Mark.WARN,
        "every wired object is refused with NetworkAPINotServed",
        "enable GKE multi-networking (--enable-multi-networking) unless NICs come by DRA claim",
    ),
    Api(
        "trainer.kubeflow.org/v1alpha1",
        ("clustertrainingruntimes", "trainingruntimes", "trainjobs"),
        Mark.FAIL,
        "nicguard's runtime caches cannot sync: its doors answer ClusterStateUnavailable",
        "install Kubeflow Trainer (v2.1 or later) before nicguard",
    ),
    Api(
        "jobset.x-k8s.io/v1alpha2",
        ("jobsets",),
        Mark.WARN,
        "Trainer cannot run TrainJobs, and the JobSet door has nothing to judge",
        "install JobSet (v0.12 or later), as Trainer requires",
    ),
    Api(
        "resource.k8s.io/v1",
        ("resourceclaimtemplates",),
        Mark.WARN,
        "the claim-template door is never called and DRA-bound runtimes are "
        "ResourceClaimTemplateNotFound",
        "Kubernetes 1.34 or later serves it; without it wire NICs by the annotation only",
    ),
)


def api_lines(served: Mapping[str, frozenset[str] | None]) -> list[Line]:
    """One line per API of ``APIS``; ``served`` maps a group version to the resources its
    discovery document lists (None: not served)."""
    lines = []
    for api in APIS:
        check = f"API {api.group_version}"
        resources = served.get(api.group_version)
        missing = [r for r in api.resources if resources is None or r not in resources]
        if not missing:
            lines.append(Line(Mark.OK, check, f"serves {', '.join(api.resources)}"))
            continue
        what = "not served" if resources is None else f"does not serve {', '.join(missing)}"
        lines.append(Line(api.mark, check, f"{what}: {api.meaning}", api.fix))
    return lines


@dataclass(frozen=True, slots=True)
class Replicas:
    """The Deployment's wanted replicas (``spec.replicas``) and its ready ones."""

    desired: int
    ready: int


def deployment_line(where: str, replicas: Replicas | None) -> Line:
    """``where`` is ``namespace/name``; ``replicas`` None when there is no such Deployment."""
    check = f"Deployment {where}"
    namespace, _, name = where.partition("/")
    if replicas is None:
        fix = "install nicguard (kubectl apply -k manifests/, or the Helm chart)"
        return Line(Mark.FAIL, check, "not found", fix)
    scale = f"kubectl -n {namespace} scale deployment {name} --replicas=3"
    if replicas.desired == 0:
        return Line(Mark.FAIL, check, "scaled to 0 replicas: every door fails closed", scale)
    found = f"{replicas.ready} of {replicas.desired} replicas ready"
    if replicas.ready == 0:
        fix = f"kubectl -n {namespace} describe pods -l app.kubernetes.io/name={name}"
        return Line(Mark.FAIL, check, f"{found}: every door fails closed", fix)
    if replicas.ready < replicas.desired:
        fix = f"kubectl -n {namespace} get pods -l app.kubernetes.io/name={name}"
        return Line(Mark.WARN, check, found, fix)
    return Line(Mark.OK, check, found)
