"""A TrainJob whose runtime the synced cache lacks: one direct read of it, within 1 s.

``kubectl apply -f runtime-and-job.yaml`` can reach the webhook with the TrainJob before the
runtime's watch event reaches the cache; judging it "runtime not found" would let drift in.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.domain.cluster import CacheStatus, ClusterSnapshot, RuntimeKey, Unverifiable
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.policy import Policy
from app.domain.slim import slim_runtime
from app.metrics import Metrics
from app.web.admission import create_admission_app
from app.web.runtime_reads import Outcome
from tests.support.held_fetch import HeldFetch
from tests.web.conftest import make_client, sample_review

RUNTIME = ("torch-distributed-tcpxo",)
KEY: RuntimeKey = (Kind.CLUSTER_TRAINING_RUNTIME, "", "torch-distributed-tcpxo")
Fetched = JsonMap | Unverifiable | None


class Fetcher:
    """Records each call and answers with ``answer`` (or raises it)."""

    def __init__(self, answer: Callable[[], Fetched]) -> None:
        self.calls: list[tuple[Kind, str, str]] = []
        self._answer = answer

    def __call__(self, kind: Kind, namespace: str, name: str) -> Fetched:
        self.calls.append((kind, namespace, name))
        return self._answer()


def _runtime(example_state: ClusterSnapshot) -> JsonMap:
    found = example_state.runtime(*KEY)
    assert isinstance(found, Mapping)
    return found


def _client(
    state: ClusterSnapshot, fetch: Fetcher, runtimes: object = None, metrics: Metrics | None = None
) -> TestClient:
    view = ClusterSnapshot(
        state.network_state,
        state.recipe_state,
        {} if runtimes is None else runtimes,  # type: ignore[arg-type]
    )
    metrics = metrics or Metrics(lambda: [CacheStatus(name="files", synced=True)])
    app = create_admission_app(view=view, policy=Policy(), metrics=metrics, fetch_runtime=fetch)
    return TestClient(app)


def runtime_reads(metrics: Metrics) -> dict[str, float]:
    """``nicguard_runtime_reads_total`` by outcome, as /metrics renders it."""
    (family,) = (
        f
        for f in text_string_to_metric_families(metrics.render().decode())
        if f.name == "nicguard_runtime_reads"
    )
    return {s.labels["outcome"]: s.value for s in family.samples if s.name.endswith("_total")}


def test_every_outcome_is_exported_as_zero_from_start_where_runtimes_are_read(
    example_state: ClusterSnapshot,
) -> None:
    metrics = Metrics(list)
    _client(example_state, Fetcher(lambda: None), metrics=metrics)
    assert runtime_reads(metrics) == dict.fromkeys(
        ["found", "not_found", "failed", "remembered", "joined", "refused", "timed_out"], 0.0
    )


def test_no_outcome_is_exported_where_no_runtime_is_read(example_state: ClusterSnapshot) -> None:
    """File mode: no fetch, so no GET whose outcomes could be 0; the family is registered."""
    _, metrics = make_client(example_state)
    assert "# TYPE nicguard_runtime_reads_total counter" in metrics.render().decode()
    assert runtime_reads(metrics) == {}


def _post(client: TestClient, name: str) -> dict[str, Any]:
    reply = client.post("/validate", json=sample_review(name))
    assert reply.status_code == 200
    response: dict[str, Any] = reply.json()["response"]
    return response


def test_a_runtime_missing_from_the_cache_is_read_once_and_judged(
    example_state: ClusterSnapshot,
) -> None:
    runtime = slim_runtime(_runtime(example_state))
    fetch = Fetcher(lambda: runtime)
    metrics = Metrics(list)
    response = _post(_client(example_state, fetch, metrics=metrics), "trainjob-patch-drift")
    assert fetch.calls == [KEY]
    assert runtime_reads(metrics)[Outcome.FOUND] == 1.0
    assert response["allowed"] is False
    assert response["status"]["details"]["causes"][0]["reason"] == "MappingDivergesFromRecipe"


def test_a_runtime_the_api_does_not_have_either_is_not_found(
    example_state: ClusterSnapshot,
) -> None:
    fetch = Fetcher(lambda: None)
    response = _post(_client(example_state, fetch), "trainjob-patch-drift")
    assert fetch.calls == [KEY]
    assert response["allowed"] is True
    assert response["warnings"] == [
        "runtime ClusterTrainingRuntime/torch-distributed-tcpxo not found; wiring not checked"
    ]


def _raise() -> Fetched:
    raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        pytest.param(
            lambda: Unverifiable("GET ClusterTrainingRuntime x: HTTP 403 Forbidden"),
            "GET ClusterTrainingRuntime x: HTTP 403 Forbidden",
            id="api-error",
        ),
        pytest.param(_raise, "it is not cached yet and reading it failed", id="bug"),
    ],
)
def test_a_failed_read_is_cluster_state_unavailable(
    example_state: ClusterSnapshot, answer: Callable[[], Fetched], reason: str
) -> None:
    response = _post(_client(example_state, Fetcher(answer)), "trainjob-patch-drift")
    assert response["allowed"] is False
    assert response["status"]["code"] == 503
    assert response["status"]["details"]["causes"][0]["reason"] == "ClusterStateUnavailable"
    assert reason in response["status"]["message"]


@pytest.fixture
def held() -> Iterator[threading.Event]:
    release = threading.Event()
    yield release
    release.set()


def test_a_read_that_does_not_answer_in_one_second_is_unverifiable(
    example_state: ClusterSnapshot, held: threading.Event
) -> None:
    runtime = _runtime(example_state)

    def never() -> Fetched:
        held.wait()
        return runtime

    metrics = Metrics(list)
    client = _client(example_state, Fetcher(never), metrics=metrics)
    response = _post(client, "trainjob-patch-drift")
    assert response["status"]["code"] == 503
    assert "a GET of it gave no answer in 1 s" in response["status"]["message"]
    # The GET still hangs: only the request that gave up is counted so far.
    counted = runtime_reads(metrics)
    assert counted[Outcome.TIMED_OUT] == 1.0
    assert sum(counted.values()) == 1.0


@pytest.mark.parametrize(
    ("review", "runtimes"),
    [
        pytest.param("trainjob-patch-drift", "cached", id="runtime-cached"),
        pytest.param("trainjob-patch-drift", Unverifiable("not synced"), id="cache-unsynced"),
        pytest.param("drifted-runtime", None, id="a-runtime-review"),
    ],
)
def test_nothing_is_read_when_the_cache_answers_or_no_runtime_is_needed(
    example_state: ClusterSnapshot, review: str, runtimes: object
) -> None:
    fetch = Fetcher(lambda: None)
    cached = {KEY: _runtime(example_state)} if runtimes == "cached" else runtimes
    response = _post(_client(example_state, fetch, cached), review)
    assert fetch.calls == []
    assert response["allowed"] is False


def _naming(runtime: str) -> dict[str, Any]:
    """A TrainJob review (``trainjob-patch-drift``) on ClusterTrainingRuntime ``runtime``."""
    review = sample_review("trainjob-patch-drift")
    review["request"]["object"]["spec"]["runtimeRef"]["name"] = runtime
    return review


def test_forged_reviews_naming_uncached_runtimes_cost_four_gets_at_most(
    example_state: ClusterSnapshot,
) -> None:
    """Four GETs hang: a fifth runtime is ClusterStateUnavailable at once; once they answer
    NotFound, the same names are answered from memory, without a GET."""
    fetch = HeldFetch({f"uncached-{i}": None for i in range(5)})
    metrics = Metrics(list)
    view = ClusterSnapshot(example_state.network_state, example_state.recipe_state, {})
    app = create_admission_app(view=view, policy=Policy(), metrics=metrics, fetch_runtime=fetch)

    async def scenario() -> list[dict[str, Any]]:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="https://nicguard") as client:

            async def post(runtime: str) -> dict[str, Any]:
                reply = await client.post("/validate", json=_naming(runtime))
                assert reply.status_code == 200
                answer: dict[str, Any] = reply.json()["response"]
                return answer

            held = [asyncio.create_task(post(f"uncached-{i}")) for i in range(4)]
            await asyncio.to_thread(fetch.wait_entered, 4)
            refused = await post("uncached-4")
            fetch.release_all()
            answers = await asyncio.gather(*held)
            again = await post("uncached-0")
            return [refused, *answers, again]

    try:
        refused, *answers, again = asyncio.run(scenario())
    finally:
        fetch.release_all()
    assert refused["allowed"] is False
    assert refused["status"]["code"] == 503
    assert [c["reason"] for c in refused["status"]["details"]["causes"]] == [
        "ClusterStateUnavailable"
    ]
    assert "4 GETs of uncached runtimes are in flight already" in refused["status"]["message"]
    for i, answer in enumerate([*answers, again]):
        assert answer["allowed"] is True
        assert answer["warnings"] == [
            f"runtime ClusterTrainingRuntime/uncached-{i % 4} not found; wiring not checked"
        ]
    assert sorted(name for _, _, name in fetch.calls) == [f"uncached-{i}" for i in range(4)]
    # What an operator reads: one request refused by the bound, four GETs sent, one request
    # answered from memory.
    assert runtime_reads(metrics) == {
        **dict.fromkeys(Outcome, 0.0),
        Outcome.REFUSED: 1.0,
        Outcome.NOT_FOUND: 4.0,
        Outcome.REMEMBERED: 1.0,
    }
