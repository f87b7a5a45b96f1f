"""The Kubernetes API client: loading its configuration, and LIST/WATCH as raw JSON objects.

Generated-client types stop here; what leaves is ``Listing``/``WatchEvent`` of plain mappings.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast

import orjson
import urllib3
from kubernetes import config
from kubernetes.client import ApiClient, ApiException, Configuration

from app.domain.fields import JsonMap, as_list, as_map, map_at, str_at, value_at
from app.kube.credentials import ClientConfigError
from app.kube.errors import BAD_REQUEST, INVALID, raw_response, read_body, status_of, watch_error

logger = logging.getLogger(__name__)

ListCall = Callable[..., object]
"""A generated ``list_*`` method with its path arguments bound (``functools.partial``)."""

_load_incluster = cast(Callable[..., None], config.load_incluster_config)
_load_kube_config = cast(Callable[..., None], config.load_kube_config)


_OBJECT_EVENTS: Final = frozenset({"ADDED", "MODIFIED", "DELETED"})
# The annotation of the bookmark that ends a watch's initial events (sendInitialEvents=true).
INITIAL_EVENTS_END: Final = "k8s.io/initial-events-end"
# The initial events' watch ends after this long, whether or not they were all sent (100,000
# objects took 25 s on the benchmark machine): then LIST pages are used instead.
INITIAL_EVENTS_SECONDS: Final = 600


# kube-apiserver 1.37 sends watch bookmarks every 60 s, but skips one while the resourceVersion
# has not moved (a quiet cluster: up to ~121 s between them), and always one 2 s before the
# watch's timeoutSeconds (measured; docs/operations.md, "Silent partitions"). Short
# watches therefore bound the silence of a healthy stream, whatever the cluster does.
WATCH_SECONDS: Final = (25, 35)
WATCH_SILENCE_ALLOWANCE: Final = 10.0


def watch_timeout() -> int:
    """A watch's timeoutSeconds: jittered so that replicas' caches do not re-watch in step."""
    return random.randint(*WATCH_SECONDS)  # noqa: S311 - spreads load, not a secret


@dataclass(frozen=True, slots=True)
class Listing:
    """A LIST result: the items and the collection resourceVersion to watch from."""

    items: Sequence[JsonMap]
    resource_version: str


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event; ``event_type`` is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR."""

    event_type: str
    obj: JsonMap


def load_api_client(environ: Mapping[str, str] = os.environ) -> ApiClient:
    """``$KUBECONFIG`` when set (as kubectl does), else in-cluster, else ``~/.kube/config``."""
    configuration = Configuration()
    explicit = environ.get("KUBECONFIG") or None
    try:
        if explicit is not None:
            _load_kube_config(config_file=explicit, client_configuration=configuration)
            return ApiClient(configuration=configuration)
        _load_incluster(client_configuration=configuration)
    except (config.ConfigException, OSError) as error:
        if explicit is not None:
            raise ClientConfigError(f"cannot use KUBECONFIG={explicit}: {error}") from None
        try:
            _load_kube_config(config_file=None, client_configuration=configuration)
        except (config.ConfigException, OSError) as kubeconfig:
            raise ClientConfigError(
                f"no Kubernetes credentials: in-cluster: {error}; kubeconfig: {kubeconfig}"
            ) from None
    return ApiClient(configuration=configuration)


class ApiListWatch:
    """LIST and WATCH through one list call, reading the JSON bodies directly.

    Raw bodies (``_preload_content=False``) skip model deserialization, so every resource
    yields plain mappings; watch ERROR events reach the cache, which owns 410 handling.
    """

    def __init__(
        self,
        call: ListCall,
        *,
        watch_seconds: Callable[[], int] = watch_timeout,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        # Small pages: each page is decoded whole before its objects are trimmed, and what that
        # transient heap leaves fragmented stays resident (500 -> 100: ~6 MiB less with 8,000
        # runtimes cached).
        page_size: int = 100,
        trim: Callable[[JsonMap], JsonMap] | None = None,
        initial_events: bool = False,
    ) -> None:
        """``trim`` cuts each object down as it is decoded, page by page and event by event.
        ``initial_events``: ``list()`` first asks for the collection as a watch's initial
        events (``call`` must take ``send_initial_events`` and ``resource_version_match``)."""
        self._call = call
        self._trim = trim
        self._page_size = page_size
        self._initial_events = initial_events
        self._stream: urllib3.BaseHTTPResponse | None = None
        self._closed = False
        self._watch_seconds = watch_seconds
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout

    def list(self) -> Listing:
        """The whole collection: streamed as a watch's initial events where the API server
        can (Kubernetes' WatchList: from its watch cache, one object per line, faster than LIST
        pages read from etcd), else LIST pages."""
        if self._initial_events:
            try:
                streamed = self._streamed()
            except ApiException as error:
                # A server without WatchList refuses the parameters (422, or 400 from a proxy).
                if status_of(error) not in (BAD_REQUEST, INVALID):
                    raise
                streamed = None
            if streamed is not None:
                return streamed
            self._initial_events = False  # asked once: LIST pages from now on
            logger.info("the API server does not stream initial events; listing in pages")
        return self._paged()

    def _streamed(self) -> Listing | None:
        """The initial events up to the bookmark that ends them; None when the stream ended
        without it (a server that ignored the request, or too slow for one watch)."""
        response = raw_response(
            self._call(
                watch=True,
                send_initial_events=True,
                resource_version_match="NotOlderThan",  # at least as new as a quorum read
                allow_watch_bookmarks=True,
                timeout_seconds=INITIAL_EVENTS_SECONDS,
                _preload_content=False,
                # The objects come one after another: silence is a dead connection.
                _request_timeout=(self._connect_timeout, self._read_timeout),
            )
        )
        self._stream = response
        objects: list[JsonMap] = []
        for event in _events(response):
            if event.event_type == "ERROR":
                raise watch_error(event.obj)
            if event.event_type in _OBJECT_EVENTS:
                objects.append(self._trimmed(event.obj))
            elif event.event_type == "BOOKMARK" and _ends_initial_events(event.obj):
                response.close()
                return Listing(objects, str_at(event.obj, "metadata", "resourceVersion") or "")
        return None

    def _paged(self) -> Listing:
        """All pages of the collection; paging bounds the JSON held at once (BENCHMARKS.md: RSS)."""
        objects: list[JsonMap] = []
        token: str | None = None
        while True:
            body = read_body(
                self._call(
                    limit=self._page_size,
                    _continue=token,
                    _preload_content=False,
                    _request_timeout=(self._connect_timeout, self._read_timeout),
                )
            )
            raw_items = as_list(value_at(body, "items")) or ()
            objects.extend(
                self._trimmed(obj) for raw in raw_items if (obj := as_map(raw)) is not None
            )
            token = str_at(body, "metadata", "continue")
            version = str_at(body, "metadata", "resourceVersion") or ""
            del body, raw_items  # this page's whole objects go before the next page is decoded
            if not token:  # every page of one LIST carries the same snapshot resourceVersion
                return Listing(objects, version)

    def watch(self, resource_version: str) -> Iterator[WatchEvent]:
        """Open the watch now (HTTP errors raise here); events are read lazily."""
        seconds = self._watch_seconds()
        response = raw_response(
            self._call(
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                # The server sends a bookmark 2 s before timeout_seconds and then ends the
                # watch, so a healthy stream is never silent much longer than that. Silence
                # beyond it means the connection died without a word (a NAT or proxy dropping
                # it): the read times out and the cache watches again from where it was.
                timeout_seconds=seconds,
                _preload_content=False,
                _request_timeout=(self._connect_timeout, seconds + WATCH_SILENCE_ALLOWANCE),
            )
        )
        self._stream = response
        if self._closed:
            response.close()
        return (
            WatchEvent(event.event_type, self._trimmed(event.obj))
            if event.event_type in _OBJECT_EVENTS
            else event
            for event in _events(response)
        )

    def _trimmed(self, obj: JsonMap) -> JsonMap:
        return obj if self._trim is None else self._trim(obj)

    def close(self) -> None:
        """Unblock a watch read from another thread; a plain ``close()`` can deadlock on TLS."""
        self._closed = True
        connection = getattr(self._stream, "connection", None)
        sock = getattr(connection, "sock", None)
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def get_json(call: Callable[..., object], *, timeout: float) -> object:
    """One GET through a generated ``get_*`` method (path arguments bound), decoded; raises
    ``ApiException`` for HTTP errors and urllib3/OS errors for transport failures."""
    return read_body(call(_preload_content=False, _request_timeout=timeout))


def _events(response: urllib3.BaseHTTPResponse) -> Iterator[WatchEvent]:
    try:
        for line in response:  # urllib3 splits the chunked stream at newlines
            decoded = _decoded(line)
            if decoded is None:
                continue  # a torn or blank line carries no event
            event_type, obj = str_at(decoded, "type"), map_at(decoded, "object")
            if event_type and obj is not None:
                yield WatchEvent(event_type, obj)
    finally:
        response.close()
        response.release_conn()


def _decoded(line: bytes) -> object | None:
    """One JSON line: orjson (listing 20,000 runtimes: 1.4 s of CPU against json's 1.7-1.8 s),
    else the json module for what orjson refuses (integers beyond 64 bits); None when it is not
    JSON."""
    decoded: object
    try:
        decoded = orjson.loads(line)
    except orjson.JSONDecodeError:
        pass
    else:
        return decoded
    try:
        decoded = json.loads(line)
    except ValueError:
        return None
    return decoded


def _ends_initial_events(bookmark: JsonMap) -> bool:
    annotations = map_at(bookmark, "metadata", "annotations") or {}
    return annotations.get(INITIAL_EVENTS_END) == "true"
