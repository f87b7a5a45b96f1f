"""Measure how often kube-apiserver sends watch BOOKMARK events, and when it ends a watch.

Opens watches with ``allowWatchBookmarks=true`` (by default: the CRD-backed GKE Networks
cluster-wide and one ConfigMap name in ``default``, each without ``timeoutSeconds`` and with
``timeoutSeconds=300``), writes nothing, and after ``--duration`` seconds prints, per watch, the
time of every event since the watch was opened, the intervals between BOOKMARKs and when (and
why) the stream ended.

Against a running e2e control plane: ``--kubeconfig`` of a token user (what
``tests/e2e/controlplane.py`` writes; the default watches need the GKE networking CRDs, see
``tests/e2e/state.py:install_crds``). Without ``--kubeconfig`` the script starts its own etcd +
kube-apiserver with those CRDs and stops them at the end. Run from the repository root as a
module, ``python -m scripts.bookmark_cadence --duration 330``, so ``tests.e2e`` imports.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import itertools
import json
import ssl
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

DEFAULT_PATHS: Final = (
    "/apis/networking.gke.io/v1/networks",
    "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dx",
)
DEFAULT_TIMEOUTS: Final = "none,300"
MAX_RETRIES: Final = 30


@dataclass(frozen=True, slots=True)
class Cluster:
    server: str
    context: ssl.SSLContext
    token: str


@dataclass(slots=True)
class Stream:
    """One watch: what arrived (seconds since it was opened, type, resourceVersion), its end."""

    url: str
    opened: float = 0.0  # time.monotonic() when the answer (the watch) began
    events: list[tuple[float, str, str, str]] = field(default_factory=list)  # +annotations
    retries: int = 0  # 429 answers before the watch opened
    ended: float | None = None  # seconds since opened
    end_reason: str = ""


def cluster_from_kubeconfig(path: Path) -> Cluster:
    """Server, CA and bearer token of the current context (token users only, as the e2e's)."""
    config: dict[str, Any] = yaml.safe_load(path.read_text())  # JSON is YAML too

    def named(section: str, name: str) -> dict[str, Any]:
        entry: dict[str, Any] = next(e for e in config[section] if e["name"] == name)
        return entry

    context = named("contexts", config["current-context"])["context"]
    cluster = named("clusters", context["cluster"])["cluster"]
    user = named("users", context["user"])["user"]
    if "token" not in user:
        raise SystemExit(f"{path}: the user of the current context has no bearer token")
    if "certificate-authority-data" in cluster:
        pem = base64.b64decode(cluster["certificate-authority-data"]).decode()
        tls = ssl.create_default_context(cadata=pem)
    else:
        tls = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
    return Cluster(str(cluster["server"]).rstrip("/"), tls, str(user["token"]))


def watch_url(
    server: str, path: str, timeout_seconds: int | None, resource_version: str | None = None
) -> str:
    query = {"watch": "true", "allowWatchBookmarks": "true"}
    if timeout_seconds is not None:
        query["timeoutSeconds"] = str(timeout_seconds)
    if resource_version is not None:
        query["resourceVersion"] = resource_version
    separator = "&" if "?" in path else "?"
    return f"{server}{path}{separator}{urllib.parse.urlencode(query)}"


def send(cluster: Cluster, url: str, read_timeout: float) -> tuple[Any, int]:
    """The response to a GET of ``url`` and how many 429s came first: a CRD's watch cache is
    initialised lazily, right after the CRD is Established; each 429 is retried after its
    Retry-After."""
    request = urllib.request.Request(  # noqa: S310 - an https URL from the kubeconfig
        url, headers={"Authorization": f"Bearer {cluster.token}"}
    )
    for retries in range(MAX_RETRIES + 1):
        try:
            reply = urllib.request.urlopen(  # noqa: S310
                request, context=cluster.context, timeout=read_timeout
            )
        except urllib.error.HTTPError as error:
            if error.code != 429 or retries == MAX_RETRIES:
                raise
            time.sleep(float(error.headers.get("Retry-After") or 1))
        else:
            return reply, retries
    raise AssertionError("unreachable")


def list_version(cluster: Cluster, path: str) -> str:
    """The resourceVersion of a LIST of ``path``: where a reflector starts its watch."""
    reply, _ = send(cluster, f"{cluster.server}{path}", 60.0)
    with reply:
        return str(json.load(reply)["metadata"]["resourceVersion"])


def follow(cluster: Cluster, stream: Stream, read_timeout: float) -> None:
    """Read ``stream`` until the server ends it or the connection fails (runs in a thread)."""
    stream.opened = time.monotonic()
    try:
        reply, stream.retries = send(cluster, stream.url, read_timeout)
        stream.opened = time.monotonic()  # the watch began with the answer's headers
        with reply:
            for line in reply:  # the apiserver frames JSON watch events one per line
                at = time.monotonic() - stream.opened
                event = json.loads(line)
                metadata = event.get("object", {}).get("metadata", {})
                version = str(metadata.get("resourceVersion", ""))
                notes = json.dumps(metadata["annotations"]) if "annotations" in metadata else ""
                stream.events.append((at, str(event.get("type")), version, notes))
        stream.end_reason = "the server ended the stream"
    except Exception as error:  # reported; the other watches go on
        stream.end_reason = f"{type(error).__name__}: {error}"
    stream.ended = time.monotonic() - stream.opened


def measure(cluster: Cluster, urls: Sequence[str], duration: float) -> list[Stream]:
    """Open every watch at once, wait ``duration`` seconds, return what was seen so far."""
    streams = [Stream(url) for url in urls]
    for stream in streams:
        args = (cluster, stream, duration + 60.0)
        threading.Thread(target=follow, args=args, daemon=True).start()
    time.sleep(duration)
    return streams


def describe(stream: Stream, duration: float) -> Iterator[str]:
    retried = f" (opened after {stream.retries} answers 429)" if stream.retries else ""
    yield f"watch {stream.url}{retried}"
    for at, kind, version, notes in stream.events:
        yield f"  {at:8.1f} s  {kind:<8} resourceVersion={version} {notes}".rstrip()
    marks = [at for at, kind, _, _ in stream.events if kind == "BOOKMARK"]
    if marks:
        gaps = ", ".join(f"{b - a:.1f}" for a, b in itertools.pairwise(marks)) or "-"
        yield f"  bookmarks: {len(marks)}; first after {marks[0]:.1f} s; intervals: {gaps} s"
    else:
        yield "  bookmarks: none"
    if stream.ended is None:
        yield f"  still open after {duration:.0f} s"
    else:
        yield f"  ended after {stream.ended:.1f} s: {stream.end_reason}"


def timeouts(text: str) -> list[int | None]:
    return [None if part == "none" else int(part) for part in text.split(",")]


@contextlib.contextmanager
def own_control_plane() -> Iterator[Path]:
    """etcd + kube-apiserver of the e2e tier with the GKE networking and Trainer CRDs."""
    from tests.e2e.controlplane import ControlPlane  # only when asked: needs the e2e binaries
    from tests.e2e.state import install_crds

    with tempfile.TemporaryDirectory(prefix="bookmark-cadence-") as workdir:
        plane = ControlPlane(Path(workdir))
        plane.start()
        try:
            install_crds(plane)
            print(f"# started {plane.versions()} at {plane.server}", flush=True)  # noqa: T201
            yield plane.kubeconfig("admin")
        finally:
            plane.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", type=Path, help="default: start a control plane")
    parser.add_argument("--duration", type=float, default=330.0, help="seconds (default 330)")
    parser.add_argument(
        "--from-list",
        action="store_true",
        help="watch from the resourceVersion of a LIST, as a reflector does (default: no "
        "resourceVersion, which v1.37 serves as a watch-list: initial events, then a bookmark)",
    )
    parser.add_argument(
        "--path", action="append", help=f"API path to watch, repeatable (default {DEFAULT_PATHS})"
    )
    parser.add_argument(
        "--timeouts",
        type=timeouts,
        default=timeouts(DEFAULT_TIMEOUTS),
        help=f"timeoutSeconds per path, 'none' for unset (default {DEFAULT_TIMEOUTS})",
    )
    args = parser.parse_args(argv)
    paths: list[str] = args.path or list(DEFAULT_PATHS)
    with contextlib.ExitStack() as stack:
        kubeconfig: Path = args.kubeconfig or stack.enter_context(own_control_plane())
        cluster = cluster_from_kubeconfig(kubeconfig)
        versions = {p: list_version(cluster, p) if args.from_list else None for p in paths}
        urls = [watch_url(cluster.server, p, t, versions[p]) for p in paths for t in args.timeouts]
        streams = measure(cluster, urls, args.duration)
        report = [line for stream in streams for line in describe(stream, args.duration)]
    print("\n".join(report), flush=True)  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
