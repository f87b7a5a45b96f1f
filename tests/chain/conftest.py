"""One chain for the whole tier: control plane, nicguard, Trainer, JobSet, the Job controller and
the garbage collector (``tests/harness/chain.py``). Binaries missing is a failure, never a skip
(``make chain`` builds them); every process's log is attached to a failing test. Tests branch on
``chain.trainer`` (v2.3.0 writes runtime snapshots, v2.2.1 none) and ``served`` (the minor)."""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from tests.harness.chain import Chain, Controller, running_chain
from tests.harness.controlplane import Served
from tests.harness.objects import unique
from tests.harness.state import create_namespace


@pytest.fixture(scope="session")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    with running_chain(tmp_path_factory.mktemp("chain")) as started:
        yield started


@pytest.fixture(scope="session")
def served(chain: Chain) -> Served:
    """The minor the tier runs on, as its apiserver says (``/version``, discovery)."""
    return chain.plane.served()


@pytest.fixture
def namespace(chain: Chain) -> str:
    """A fresh namespace (left behind: the tier runs no namespace controller)."""
    name = unique("chain")
    create_namespace(chain.plane, name)
    return name


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        chain, kueue = funcargs.get("chain"), funcargs.get("kueue")
        if isinstance(chain, Chain):
            report.sections.append(("chain process logs", chain.report()))
        if isinstance(kueue, Controller):
            report.sections.append(("kueue log", kueue.report()))
    return report
