"""The whole e2e stack: control plane, CRDs, nicguard's base manifests, nicguard, its webhook.

``running()`` always stops nicguard, kube-apiserver and etcd (by PID) when it exits.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness.controlplane import ControlPlane
from tests.harness.objects import (
    DENIED,
    RECIPE_PAIRS,
    TRAINER_V2_3,
    Trainer,
    as_list,
    conditions,
    example,
    for_trainer,
    load,
    network,
    param_set,
    param_set_status,
    runtime,
    unique,
)
from tests.harness.state import (
    NETWORKS,
    PARAM_SETS,
    RECIPE,
    Run,
    apply_networks,
    apply_recipe,
    checked,
    create_namespace,
    eventually,
    grant_developers,
    install_crds,
    install_report_crds,
    recipe_ref,
    set_status,
)
from tests.harness.webhook import Nicguard, install_base, register


@dataclass(frozen=True, slots=True)
class Stack:
    plane: ControlPlane
    nicguard: Nicguard
    webhook_config: dict[str, Any]
    workdir: Path
    trainer: Trainer = TRAINER_V2_3  # whose CRDs the control plane serves

    def report(self) -> str:
        trainer = f"Trainer CRDs {self.trainer.version}"
        return f"{trainer}\n{self.plane.report()}\n{self.nicguard.report()}"

    def apply(self, *objects: dict[str, Any], who: str = "alice", dry_run: bool = False) -> Run:
        """``kubectl apply -f -`` of ``objects`` as ``who`` (``--dry-run=server`` if asked)."""
        args = ["apply", "-f", "-", *(["--dry-run=server"] if dry_run else [])]
        return self.plane.kubectl(who, *args, input=as_list(objects))

    def kubectl(self, *args: str, who: str = "alice") -> Run:
        return self.plane.kubectl(who, *args)

    def judged(self, obj: dict[str, Any], until: str, *, who: str = "alice") -> Run:
        """A server dry run of ``obj`` as ``who``, repeated until stderr shows ``until`` ("" for:
        allowed without a warning): nicguard's caches follow what was just written by watch."""
        if until:
            return eventually(
                lambda: self.apply(obj, dry_run=True, who=who), lambda run: until in run.stderr
            )
        return eventually(
            lambda: self.apply(obj, dry_run=True, who=who),
            lambda run: run.returncode == 0 and not run.stderr,
        )


@contextlib.contextmanager
def running(
    workdir: Path,
    *,
    network_api: bool = True,
    trainer: Trainer = TRAINER_V2_3,
    nicguard_args: Sequence[str] = (),
    report_apis: Sequence[str] = (),
    otlp_endpoint: str | None = None,
    jobset: bool = False,
    beta_dra: bool = False,
) -> Iterator[Stack]:
    """Everything up, the webhook in effect; with ``network_api=False`` no Network CRD, with
    ``jobset`` JobSet's;
    ``nicguard_args`` are added to ``nicguard serve``'s command line; ``report_apis`` (of
    ``state.REPORT_APIS``) are the policy report CRDs served before nicguard starts;
    ``otlp_endpoint``, ``beta_dra``: see ``ControlPlane`` (off by default)."""
    plane = ControlPlane(workdir, otlp_endpoint=otlp_endpoint, beta_dra=beta_dra)
    nicguard = Nicguard(plane, workdir, args=nicguard_args)
    try:
        plane.start()
        install_crds(plane, network_api=network_api, trainer=trainer, jobset=jobset)
        if report_apis:
            install_report_crds(plane, *report_apis)
        config = install_base(plane)
        grant_developers(plane)
        nicguard.start()
        register(plane, nicguard, config)
        yield Stack(plane, nicguard, config, workdir, trainer)
    finally:
        try:
            nicguard.stop()
        finally:
            plane.stop()


def populate(stack: Stack) -> str:
    """``examples/cluster`` in the cluster and in nicguard's caches; returns the recipe ref."""
    plane = stack.plane
    apply_networks(plane)
    recipe = apply_recipe(plane)
    wait_for_recipe(stack)
    runtimes = [
        *load("cluster/torch-distributed-tcpxo.yaml"),
        *load("cluster/torch-distributed.yaml"),
    ]
    checked(stack.apply(*runtimes, who="admin"), "applying the example runtimes")
    wait_for_runtime(stack)
    return recipe


def wait_for_recipe(stack: Stack) -> None:
    """Until nicguard allows a recipe-bound runtime: it holds the recipe and the Networks."""
    good = runtime("e2e-cache-probe", recipe_bound=True)
    eventually(
        lambda: stack.apply(good, who="admin", dry_run=True),
        lambda run: run.returncode == 0 and not run.stderr,
    )


def replace_data(stack: Stack, data: dict[str, str], *flags: str) -> None:
    namespace, name = RECIPE
    patch = json.dumps([{"op": "replace", "path": "/data", "value": data}])
    args = ["patch", "configmap", name, "-n", namespace, "--type=json", "-p", patch, *flags]
    checked(stack.kubectl(*args, who="admin"), "editing the recipe")


@contextlib.contextmanager
def recipe_edited(stack: Stack, data: dict[str, str], *flags: str) -> Iterator[str]:
    """Replace the recipe's data (``kubectl patch`` with ``flags``); yields the new ref; restores
    it and waits for nicguard after."""
    namespace, name = RECIPE
    get = ["get", "configmap", name, "-n", namespace, "-o", "json"]
    original = json.loads(checked(stack.kubectl(*get, who="admin"), "reading the recipe").stdout)
    replace_data(stack, data, *flags)
    try:
        yield recipe_ref(stack.plane)
    finally:
        replace_data(stack, original["data"], *flags)
        wait_for_recipe(stack)


def wait_for_runtime(stack: Stack) -> None:
    """Until nicguard resolves TrainJobs on the shipped ``torch-distributed-tcpxo``."""
    namespace = "e2e-cache-probe"
    create_namespace(stack.plane, namespace)
    drift = for_trainer(example("objects/trainjob-patch-drift.yaml"), stack.trainer)
    drift["metadata"]["namespace"] = namespace
    eventually(
        lambda: stack.apply(drift, who="admin", dry_run=True),
        lambda run: DENIED in run.stderr and "[MappingDivergesFromRecipe]" in run.stderr,
    )


def ready_network(
    where: Stack | ControlPlane,
    name: str,
    *,
    mode: str | None = "NetDevice",
    network_type: str = "Device",
) -> None:
    """Network ``name`` (of ``spec.type`` ``network_type``) and its GKENetworkParamSet
    (``spec.deviceMode`` ``mode``, None: none) as GKE leaves them once set up: both created by
    admin, then the param set Ready (its ``networkName`` set) and the Network Ready and
    ParamsReady, each through the subresource. nicguard's caches follow by watch: poll before
    relying on it."""
    plane = where.plane if isinstance(where, Stack) else where
    both = as_list([param_set(name, mode), network(name, network_type)])
    checked(plane.kubectl("admin", "apply", "-f", "-", input=both), f"creating Network {name}")
    set_status(plane, PARAM_SETS, name, param_set_status(name, ready=True))
    set_status(plane, NETWORKS, name, conditions(ready=True))


def network_backed_runtime(stack: Stack, namespace: str) -> tuple[str, str]:
    """A ready Network of its own (``ready_network``) and a TrainingRuntime using it at eth8,
    both admitted."""
    net = unique("gpu-nic-own")
    ready_network(stack, net)
    name = unique("torch-tcpxo")
    obj = runtime(name, namespace=namespace, pairs=[*RECIPE_PAIRS[:7], ("eth8", net)])
    # A denial has no side effect, so applying until nicguard's cache holds the Network is safe.
    eventually(lambda: stack.apply(obj), lambda run: run.returncode == 0 and not run.stderr)
    return net, name
