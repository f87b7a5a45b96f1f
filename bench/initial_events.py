"""The floor under nicguard's time to ready: how long the API server takes to stream the collections
nicguard caches to a client that only reads the lines, each collection on its own watch at once
(as nicguard's caches do), and what that costs the API server's CPU."""

from __future__ import annotations

import ssl
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

from bench.run import cpu_seconds
from tests.harness.controlplane import ControlPlane

COLLECTIONS: Final = (
    "networking.gke.io/v1/networks",
    "networking.gke.io/v1/gkenetworkparamsets",
    "trainer.kubeflow.org/v1alpha1/clustertrainingruntimes",
    "trainer.kubeflow.org/v1alpha1/trainingruntimes",
    "resource.k8s.io/v1/resourceclaimtemplates",
)
_QUERY: Final = (
    "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
    "&allowWatchBookmarks=true&timeoutSeconds=600"
)
_END: Final = b"k8s.io/initial-events-end"


@dataclass(frozen=True, slots=True)
class Streamed:
    seconds: float
    apiserver_cpu: float
    lines: int
    megabytes: float


def apiserver_cpu(plane: ControlPlane) -> float:
    """CPU seconds kube-apiserver has used so far."""
    (process,) = (p for p in plane.processes if p.name == "kube-apiserver")
    return cpu_seconds(process.pid)


def stream_all(plane: ControlPlane) -> Streamed:
    """Every collection's initial events, read up to the bookmark that ends them and dropped."""
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    token = plane.users["nicguard"].token

    def read(collection: str) -> tuple[int, int]:
        request = urllib.request.Request(  # noqa: S310 - the test control plane's https URL
            f"{plane.server}/apis/{collection}{_QUERY}",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        )
        lines = size = 0
        with urllib.request.urlopen(request, context=context, timeout=600) as stream:  # noqa: S310
            for line in stream:
                lines, size = lines + 1, size + len(line)
                if b'"BOOKMARK"' in line[:40] and _END in line:
                    return lines, size
        raise RuntimeError(f"{collection}: the stream ended before its initial events did")

    cpu, started = apiserver_cpu(plane), time.monotonic()
    with ThreadPoolExecutor(max_workers=len(COLLECTIONS)) as pool:
        counted = list(pool.map(read, COLLECTIONS))
    return Streamed(
        time.monotonic() - started,
        apiserver_cpu(plane) - cpu,
        sum(lines for lines, _ in counted),
        sum(size for _, size in counted) / 1e6,
    )
