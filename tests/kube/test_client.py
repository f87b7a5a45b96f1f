"""LIST/WATCH as plain objects (app.kube.client.ApiListWatch), answered by in-memory responses."""

from __future__ import annotations

import io
import json

import urllib3

from app.domain.slim import slim_runtime
from app.kube.client import (
    WATCH_SECONDS,
    WATCH_SILENCE_ALLOWANCE,
    ApiListWatch,
    Listing,
    WatchEvent,
    watch_timeout,
)

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _runtime(name: str, version: str = "1") -> dict[str, object]:
    metadata = {
        "name": name,
        "namespace": "team",
        "resourceVersion": version,
        "annotations": {LAST_APPLIED: "{" + "x" * 1000 + "}"},
        "managedFields": [{"manager": "kubectl"}],
    }
    job = {"name": "node", "template": {"spec": {"template": {"spec": {"containers": []}}}}}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": metadata,
        "spec": {"template": {"spec": {"replicatedJobs": [job]}}},
    }


def _response(data: bytes) -> urllib3.HTTPResponse:
    return urllib3.HTTPResponse(body=io.BytesIO(data), preload_content=False)


class _GeneratedList:
    """Stands in for a generated ``list_*`` method: two LIST pages, then a watch stream."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    def __call__(self, **kwargs: object) -> urllib3.HTTPResponse:
        self.calls.append(kwargs)
        if kwargs.get("watch"):
            events = [
                {"type": "MODIFIED", "object": _runtime("a", "12")},
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "13"}}},
                {"type": "DELETED", "object": _runtime("b", "14")},
            ]
            return _response(b"".join(json.dumps(e).encode() + b"\n" for e in events))
        first = kwargs.get("_continue") is None
        page = {
            "items": [_runtime("a" if first else "b")],
            "metadata": {"resourceVersion": "10"} | ({"continue": "next"} if first else {}),
        }
        return _response(json.dumps(page).encode())


def test_a_trimming_source_trims_every_listed_and_watched_object() -> None:
    call = _GeneratedList()
    source = ApiListWatch(call, page_size=1, trim=slim_runtime)
    assert source.list() == Listing(
        [slim_runtime(_runtime("a")), slim_runtime(_runtime("b"))], "10"
    )
    assert [c.get("_continue") for c in call.calls] == [None, "next"]
    assert list(source.watch("10")) == [
        WatchEvent("MODIFIED", slim_runtime(_runtime("a", "12"))),
        WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "13"}}),
        WatchEvent("DELETED", slim_runtime(_runtime("b", "14"))),
    ]


def test_a_source_without_trim_passes_objects_whole() -> None:
    source = ApiListWatch(_GeneratedList(), page_size=1)
    assert source.list().items == [_runtime("a"), _runtime("b")]
    assert [e.obj for e in source.watch("10")] == [
        _runtime("a", "12"),
        {"metadata": {"resourceVersion": "13"}},
        _runtime("b", "14"),
    ]


def test_a_watch_is_short_and_a_silence_past_its_end_is_a_read_timeout() -> None:
    call = _GeneratedList()
    source = ApiListWatch(call, watch_seconds=lambda: 31, connect_timeout=4.0)
    list(source.watch("10"))
    watch = call.calls[-1]
    assert (watch["timeout_seconds"], watch["allow_watch_bookmarks"]) == (31, True)
    # The server ends a watch at timeoutSeconds (a bookmark 2 s before): silence beyond that
    # plus the allowance is a dead connection, not a quiet cluster.
    assert watch["_request_timeout"] == (4.0, 31 + WATCH_SILENCE_ALLOWANCE)


def test_watch_timeouts_are_jittered_within_the_bounds() -> None:
    seen = {watch_timeout() for _ in range(500)}
    assert seen <= set(range(WATCH_SECONDS[0], WATCH_SECONDS[1] + 1))
    assert len(seen) > 5  # spread, so replicas do not re-watch in step
    assert WATCH_SECONDS[1] + WATCH_SILENCE_ALLOWANCE < 60  # well under the old 330 s
