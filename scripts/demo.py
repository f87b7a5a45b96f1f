"""``make demo``: nicguard behind a real kube-apiserver, one good apply and three denials.

Brings up etcd + kube-apiserver on 127.0.0.1 (tests/harness/controlplane.py), installs the CRDs and
nicguard's own manifests, runs ``nicguard serve`` as its ServiceAccount, registers the shipped
webhook configuration, loads ``examples/cluster`` and then runs each ``kubectl`` command shown,
as the non-admin user ``alice``, printing its real output. Everything is stopped at the end.

Run from the repository root as a module, ``python -m scripts.demo`` (what ``make demo`` does), so
the harness imports as the package ``tests.harness``.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType

from tests.harness.stack import Stack, running, wait_for_recipe, wait_for_runtime
from tests.harness.state import apply_networks, apply_recipe, create_namespace

ROOT = Path(__file__).resolve().parents[1]

STEPS = (
    (
        "The GPUDirect-TCPXO runtime as AICR ships it, wired as the recipe records: allowed",
        ("apply", "-f", "examples/cluster/torch-distributed-tcpxo.yaml"),
    ),
    (
        "Someone hand-edits the installed runtime, swapping eth3 and eth4: denied",
        ("replace", "-f", "examples/objects/drifted-runtime.yaml"),
    ),
    (
        "A team's own runtime maps eth8 to a Network the cluster does not have: denied",
        ("apply", "-f", "examples/objects/missing-network-runtime.yaml"),
    ),
    (
        "A TrainJob re-maps the NICs of its node pods through runtimePatches: denied",
        ("apply", "-f", "examples/objects/trainjob-patch-drift.yaml"),
    ),
)


def say(line: str = "") -> None:
    print(line, flush=True)  # noqa: T201 - the transcript is the product


def set_up(stack: Stack) -> None:
    plane = stack.plane
    say(f"[setup] {plane.versions()} on 127.0.0.1")
    say("[setup] CRDs: Trainer (CTR, TR, TrainJob), GKE Network, GKENetworkParamSet")
    say("[setup] manifests/namespace/, manifests/: namespace, ServiceAccount, least-privilege RBAC")
    say(
        "[setup] nicguard serve (Kubernetes mode) as system:serviceaccount:nicguard-system:nicguard"
    )
    names = ", ".join(hook["name"] for hook in stack.webhook_config["webhooks"])
    say(f"[setup] manifests/ ValidatingWebhookConfiguration registered: {names}")
    apply_networks(plane)
    say("[setup] examples/cluster/networks.yaml: 9 Networks, conditions via the status subresource")
    say(f"[setup] examples/cluster/recipe-configmap.yaml: recipe {apply_recipe(plane)}")
    create_namespace(plane, "team-a")
    say("[setup] namespace team-a; commands below run as alice (not an admin)")
    wait_for_recipe(stack)


def show(stack: Stack, number: int, title: str, args: tuple[str, ...]) -> int:
    say()
    say(f"# {number}. {title}")
    say(f"$ kubectl {' '.join(args)}")
    run = stack.plane.kubectl("alice", *args)
    for text in (run.stdout, run.stderr):
        if text.strip():
            say(text.rstrip())
    say(f"(exit status {run.returncode})")
    return run.returncode


def demo(workdir: Path) -> int:
    failures = 0
    with running(workdir) as stack:
        try:
            set_up(stack)
            for number, (title, args) in enumerate(STEPS, start=1):
                if number == len(STEPS):
                    wait_for_runtime(stack)  # nicguard resolves TrainJobs from its runtime cache
                expected = 0 if number == 1 else 1
                failures += show(stack, number, title, args) != expected
        except BaseException:
            say(stack.report())
            raise
    say()
    say("[teardown] nicguard, kube-apiserver and etcd stopped")
    return 1 if failures else 0


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through running(), which stops every process


def main() -> int:
    signal.signal(signal.SIGTERM, _terminate)
    os.chdir(ROOT)  # the commands shown name files relative to the repository
    with tempfile.TemporaryDirectory(prefix="nicguard-demo-") as workdir:
        return demo(Path(workdir))


if __name__ == "__main__":
    sys.exit(main())
