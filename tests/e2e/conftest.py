"""Session fixtures of the e2e tier: one real control plane with nicguard for most tests.

That plane serves the Kubeflow Trainer v2.3.0 CRDs and JobSet v0.12.0's. TrainJob tests run on
planes with the v2.2.1 and v2.1.0 CRDs as well: a module overrides ``stack`` with
``each_trainer`` (see test_trainjobs.py). ``served`` says which Kubernetes minor the tier runs
on and whether it serves ``resource.k8s.io/v1``: tests whose objects a minor lacks assert what
nicguard does there instead (docs/compatibility.md).
Binaries missing is a failure, never a skip (``make e2e`` builds them). Logs of etcd,
kube-apiserver and nicguard stay in pytest's temp dir and are attached to failing tests.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from tests.harness.controlplane import Served
from tests.harness.objects import TRAINER_V2_1, TRAINER_V2_2, TRAINER_V2_3, Trainer, unique
from tests.harness.stack import Stack, populate, running
from tests.harness.state import create_namespace, recipe_ref as read_recipe_ref

# The session stack of each Trainer release, by fixture name.
TRAINER_STACKS = {
    TRAINER_V2_3: "trainer_v2_3_stack",
    TRAINER_V2_2: "trainer_v2_2_stack",
    TRAINER_V2_1: "trainer_v2_1_stack",
}


def populated(factory: pytest.TempPathFactory, trainer: Trainer) -> Iterator[Stack]:
    """Control plane + CRDs (JobSet's too) + nicguard (as its ServiceAccount) + webhook +
    example state."""
    workdir = factory.mktemp(f"cluster-{trainer.version}")
    with running(workdir, trainer=trainer, jobset=True) as started:
        populate(started)
        yield started


@pytest.fixture(scope="session")
def trainer_v2_3_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from populated(tmp_path_factory, TRAINER_V2_3)


@pytest.fixture(scope="session")
def trainer_v2_2_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from populated(tmp_path_factory, TRAINER_V2_2)


@pytest.fixture(scope="session")
def trainer_v2_1_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from populated(tmp_path_factory, TRAINER_V2_1)


@pytest.fixture(scope="session")
def stack(trainer_v2_3_stack: Stack) -> Stack:
    """The default stack: Trainer v2.3.0 (``runtimePatches``)."""
    return trainer_v2_3_stack


@pytest.fixture(scope="session")
def served(trainer_v2_3_stack: Stack) -> Served:
    """The minor the tier runs on, as its apiserver says (``/version``, discovery)."""
    return trainer_v2_3_stack.plane.served()


@pytest.fixture(params=list(TRAINER_STACKS), ids=lambda trainer: f"trainer-{trainer.version}")
def each_trainer(request: pytest.FixtureRequest) -> Stack:
    """The session stack of each Trainer release in turn (for TrainJob tests)."""
    stack: Stack = request.getfixturevalue(TRAINER_STACKS[request.param])
    return stack


@pytest.fixture
def recipe_ref(stack: Stack) -> str:
    """``nicguard-system/nicguard-recipe@<resourceVersion>`` now (tests may edit the recipe)."""
    return read_recipe_ref(stack.plane)


@pytest.fixture
def namespace(stack: Stack) -> str:
    """A fresh namespace (never deleted: without a controller-manager it would stay Terminating)."""
    name = unique("e2e")
    create_namespace(stack.plane, name)
    return name


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        for value in funcargs.values():
            if isinstance(value, Stack):
                report.sections.append(("e2e process logs", value.report()))
            elif isinstance(getattr(value, "stack", None), Stack):
                # The fault, replica and client-certificate stacks wrap a Stack of their own.
                shown = value.report() if hasattr(value, "report") else value.stack.report()
                report.sections.append(("e2e process logs", shown))
    return report
