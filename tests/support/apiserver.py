"""A local fake of the Kubernetes API over real HTTP: a function answers each request, the
server records them. For the adapters' requests, not the API's semantics (those the e2e tier
checks against a real kube-apiserver)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubernetes.client import ApiClient, Configuration

Reply = tuple[int, object]
"""A status code and the JSON body to answer with."""


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: object
    """The JSON body, None when there is none."""


@dataclass(frozen=True)
class Watch:
    """A watch: 200 with chunked ``events``, then held open until teardown when ``hold``."""

    events: tuple[object, ...] = ()
    hold: bool = False


@dataclass(frozen=True)
class Silence:
    """No answer at all until teardown: the client's timeout is what ends the request."""


Answer = Reply | Watch | Silence
Respond = Callable[[Request], Answer]


def listed(*items: object, resource_version: str = "10") -> Reply:
    metadata = {"resourceVersion": resource_version}
    return 200, {"kind": "List", "metadata": metadata, "items": list(items)}


def status(code: int, reason: str, message: str = "") -> Reply:
    return code, {"kind": "Status", "code": code, "reason": reason, "message": message}


def discovery(group_version: str) -> Reply:
    return 200, {"kind": "APIResourceList", "groupVersion": group_version, "resources": []}


def routes(table: Mapping[str, Reply]) -> Respond:
    """Answers by path alone, 404 NotFound for any path not in ``table``."""
    return lambda request: table.get(request.path, status(404, "NotFound"))


class FakeApiServer(ThreadingHTTPServer):
    """Answers every request with ``respond``, recording each in ``requests``."""

    daemon_threads = True

    def __init__(self, respond: Respond) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.respond = respond
        self.requests: list[Request] = []
        self.closing = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"

    @property
    def queries(self) -> list[tuple[str, dict[str, str]]]:
        return [(request.path, request.query) for request in self.requests]

    @property
    def paths(self) -> list[str]:
        return [request.path for request in self.requests]

    def kubeconfig(self, directory: Path) -> Path:
        """A kubeconfig naming this server, as a user's would."""
        return kubeconfig(directory, self.url)

    def handle_error(self, request: object, client_address: object) -> None:
        return  # a client that hung up on a held watch or a silence is expected here


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked watch streams, as the apiserver does
    server: FakeApiServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base signature
        return

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def do_PUT(self) -> None:
        self._answer()

    def do_PATCH(self) -> None:
        self._answer()

    def do_DELETE(self) -> None:
        self._answer()

    def _answer(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""
        request = Request(
            method=self.command,
            path=url.path,
            query={key: values[0] for key, values in parse_qs(url.query).items()},
            content_type=self.headers.get("Content-Type") or "",
            body=json.loads(data) if data else None,
        )
        self.server.requests.append(request)
        answer = self.server.respond(request)
        if isinstance(answer, Silence):
            self.server.closing.wait()
        elif isinstance(answer, Watch):
            self._stream(answer)
        else:
            self._reply(*answer)

    def _reply(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, stream: Watch) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in stream.events:
            line = json.dumps(event).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        if stream.hold:
            self.server.closing.wait()
        self.wfile.write(b"0\r\n\r\n")


@contextmanager
def serving(respond: Respond) -> Iterator[FakeApiServer]:
    """The server, answering on a loopback port until the block ends."""
    server = FakeApiServer(respond)
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    try:
        yield server
    finally:
        server.closing.set()
        server.shutdown()
        server.server_close()


@contextmanager
def client_of(respond: Respond) -> Iterator[tuple[FakeApiServer, ApiClient]]:
    """The server and an ``ApiClient`` of the official client pointed at it."""
    with serving(respond) as server:
        api_client = ApiClient(Configuration(host=server.url))
        try:
            yield server, api_client
        finally:
            api_client.rest_client.close()


class ObjectStore:
    """Answers like an apiserver keeping plain objects by path: GET, POST to the collection
    (409 when it exists), PUT at the resourceVersion read (409 when stale), PATCH as a strategic
    merge (lists of named items merged by name) at the resourceVersion it names, DELETE.
    ``failing`` answers ``(method, path)`` with a given reply instead."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.failing: dict[tuple[str, str], Reply] = {}
        self._version = 0

    def put(self, path: str, obj: Mapping[str, object]) -> dict[str, Any]:
        """Store ``obj`` at ``path`` as a write would, with a new resourceVersion."""
        self._version += 1
        stored: dict[str, Any] = json.loads(json.dumps(obj))
        stored.setdefault("metadata", {})["resourceVersion"] = str(self._version)
        self.objects[path] = stored
        return stored

    def __call__(self, request: Request) -> Answer:
        forced = self.failing.get((request.method, request.path))
        if forced is not None:
            return forced
        current = self.objects.get(request.path)
        body = request.body if isinstance(request.body, dict) else {}
        if request.method == "POST":
            path = f"{request.path}/{body['metadata']['name']}"
            if path in self.objects:
                return status(409, "AlreadyExists")
            return 201, self.put(path, body)
        if current is None:
            return status(404, "NotFound")
        if request.method == "GET":
            return 200, current
        if request.method == "DELETE":
            del self.objects[request.path]
            return 200, {"kind": "Status", "status": "Success"}
        wanted = _resource_version(body)
        if wanted is not None and wanted != _resource_version(current):
            return status(409, "Conflict", "the object has been modified")
        if request.method == "PUT":
            return 200, self.put(request.path, body)
        merged = _merged(current, body)
        assert isinstance(merged, dict)
        return 200, self.put(request.path, merged)


def _resource_version(obj: Mapping[str, object]) -> object:
    metadata = obj.get("metadata")
    return metadata.get("resourceVersion") if isinstance(metadata, dict) else None


def _merged(current: object, patch: object) -> object:
    """A strategic merge, as the apiserver does it for maps and for lists keyed by name."""
    if isinstance(current, dict) and isinstance(patch, dict):
        merged = dict(current)
        for key, value in patch.items():
            merged[key] = _merged(current.get(key), value)
        return merged
    if isinstance(current, list) and isinstance(patch, list):
        by_name = {item.get("name"): item for item in patch if isinstance(item, dict)}
        kept = [
            _merged(item, by_name.pop(item.get("name"), {})) if isinstance(item, dict) else item
            for item in current
        ]
        return kept + list(by_name.values())
    return patch


def kubeconfig(directory: Path, server: str) -> Path:
    """``directory/kubeconfig``: a token user of the API server at URL ``server``."""
    path = directory / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t0ken"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path
