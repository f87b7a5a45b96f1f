"""LIST/WATCH as plain objects (app.kube.client.ApiListWatch), answered by in-memory responses."""

from __future__ import annotations

import io
import json

import pytest
import urllib3
from kubernetes.client import ApiException

from app.domain.slim import slim_runtime
from app.kube.client import (
    INITIAL_EVENTS_END,
    INITIAL_EVENTS_SECONDS,
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


_END = {"metadata": {"resourceVersion": "20", "annotations": {INITIAL_EVENTS_END: "true"}}}


class _WatchListServer(_GeneratedList):
    """Also answers a watch with ``send_initial_events``: ``initial`` as its lines, or
    ``refusal`` as an HTTP error; then LIST pages and watches as ``_GeneratedList``."""

    def __init__(
        self, initial: list[dict[str, object]] | None = None, refusal: int | None = None
    ) -> None:
        super().__init__()
        self.initial, self.refusal = initial or [], refusal

    def __call__(self, **kwargs: object) -> urllib3.HTTPResponse:
        if not kwargs.get("send_initial_events"):
            return super().__call__(**kwargs)
        self.calls.append(kwargs)
        if self.refusal is not None:
            raise ApiException(status=self.refusal, reason="refused")
        return _response(b"".join(json.dumps(e).encode() + b"\n" for e in self.initial))


def _initial_asks(server: _GeneratedList) -> int:
    return sum(1 for c in server.calls if c.get("send_initial_events"))


def test_the_collection_comes_as_a_watch_s_initial_events_up_to_their_end_bookmark() -> None:
    server = _WatchListServer(
        [
            {"type": "ADDED", "object": _runtime("a", "11")},
            {"type": "ADDED", "object": _runtime("b", "12")},
            {"type": "BOOKMARK", "object": _END},
            {"type": "MODIFIED", "object": _runtime("a", "21")},  # after the end: not listed
        ]
    )
    source = ApiListWatch(server, trim=slim_runtime, initial_events=True)
    assert source.list() == Listing(
        [slim_runtime(_runtime("a", "11")), slim_runtime(_runtime("b", "12"))], "20"
    )
    (asked,) = server.calls
    assert asked["watch"] is True
    assert asked["send_initial_events"] is True
    assert asked["resource_version_match"] == "NotOlderThan"
    assert asked["allow_watch_bookmarks"] is True
    assert asked["timeout_seconds"] == INITIAL_EVENTS_SECONDS


def test_an_empty_collection_is_just_the_end_bookmark() -> None:
    source = ApiListWatch(
        _WatchListServer([{"type": "BOOKMARK", "object": _END}]), initial_events=True
    )
    assert source.list() == Listing([], "20")


@pytest.mark.parametrize("status", [400, 422])
def test_a_server_refusing_initial_events_is_listed_in_pages_from_then_on(status: int) -> None:
    server = _WatchListServer(refusal=status)
    source = ApiListWatch(server, page_size=1, initial_events=True)
    assert source.list() == Listing([_runtime("a"), _runtime("b")], "10")
    assert source.list() == Listing([_runtime("a"), _runtime("b")], "10")
    assert _initial_asks(server) == 1


def test_initial_events_ending_without_their_bookmark_fall_back_to_pages() -> None:
    # A plain bookmark is not the end; a stream cut at timeoutSeconds never sent it.
    plain: dict[str, object] = {
        "type": "BOOKMARK",
        "object": {"metadata": {"resourceVersion": "15"}},
    }
    server = _WatchListServer([{"type": "ADDED", "object": _runtime("x")}, plain])
    source = ApiListWatch(server, page_size=1, initial_events=True)
    assert source.list() == Listing([_runtime("a"), _runtime("b")], "10")
    assert _initial_asks(server) == 1


@pytest.mark.parametrize("status", [401, 403, 404, 500])
def test_other_refusals_of_initial_events_fail_the_list(status: int) -> None:
    source = ApiListWatch(_WatchListServer(refusal=status), initial_events=True)
    with pytest.raises(ApiException) as raised:
        source.list()
    assert raised.value.status == status


def test_an_error_event_among_initial_events_fails_the_list() -> None:
    gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    source = ApiListWatch(
        _WatchListServer([{"type": "ERROR", "object": gone}]), initial_events=True
    )
    with pytest.raises(ApiException) as raised:
        source.list()
    assert raised.value.status == 410


def test_an_integer_orjson_refuses_is_decoded_all_the_same() -> None:
    big = _runtime("big", "30")
    big["spec"] = {"replicas": 2**70}
    server = _WatchListServer(
        [{"type": "ADDED", "object": big}, {"type": "BOOKMARK", "object": _END}]
    )
    assert ApiListWatch(server, initial_events=True).list() == Listing([big], "20")
