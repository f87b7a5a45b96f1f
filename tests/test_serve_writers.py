"""No writer can make nicguard refuse another's review (SPEC §10), against a live ``nicguard
serve`` (file mode, real TLS). For a fixed number of rounds, all at once:

- attackers post reviews whose interfaces annotation is a list no machine attaches: a
  one-template JobSet listing 50,000 entries (~2.8 MiB) and Pods carrying 250 KiB of them;
- abandoners post costly JobSet UPDATEs (~1.5 MiB, 1,000 templates) and runtime snapshot
  ConfigMaps (decoded on the YAML thread), and close their connection 0.2 s later, unanswered;
- legitimate clients post a correctly wired 100-template JobSet (~77 KiB, costly: the judging
  thread's), a wired Pod, and a runtime snapshot of the example runtime.

Asserted: every legitimate review answered with its verdict (none refused 503 or closed); every
long list denied ``InterfacesAnnotationMalformed`` or refused, never allowed; abandoned reviews
dropped (``nicguard_reviews_dropped_total``) and never more judged than sent; RSS within 200
MiB; ``/healthz`` answering every poll. Latencies are printed (RELIABILITY.md), not asserted.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

import pytest

from tests.harness.procs import http_status
from tests.live_serve import LiveServe, live_serve, memory_kib
from tests.support.costly_jobset import Edit, costly_jobset_update
from tests.support.hostile_snapshots import configmap_review_body, empty_maps
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow

INTERFACES: Final = "networking.gke.io/interfaces"
RSS_BOUND_MIB: Final = 200
ABANDON_S: Final = 0.2
CLIENT_TIMEOUT_S: Final = 30.0  # bounds a hang only
ROUNDS: Final = {"jobset-attack": 6, "pod-attack": 12, "abandon": 12, "legit": 10}
SENDERS: Final = {"jobset-attack": 2, "pod-attack": 6, "abandon-jobset": 3, "abandon-yaml": 3}
LEGIT_CLIENTS: Final = 2
EXAMPLE_RUNTIME: Final = (
    ROOT / "examples" / "cluster" / "torch-distributed-tcpxo.yaml"
).read_text()


def _review(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ROOT / "examples" / "reviews" / name).read_bytes())
    return loaded


def _long_list(entries: int) -> str:
    listed = [{"interfaceName": "eth0", "network": "default"}]
    listed += [
        {"interfaceName": f"eth{n}", "network": f"gpu-nic-{n % 8}"} for n in range(1, entries)
    ]
    return json.dumps(listed, separators=(",", ":"))


def _created(update: bytes, uid: str) -> dict[str, Any]:
    """The UPDATE review ``update`` as the CREATE of its new object."""
    review: dict[str, Any] = json.loads(update)
    request = review["request"]
    del request["oldObject"]
    request["operation"], request["uid"] = "CREATE", uid
    return review


def _jobset_attack() -> bytes:
    review = _created(costly_jobset_update(Edit.CLEAN, templates=1), "attack-jobset")
    template = review["request"]["object"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    template["template"]["metadata"]["annotations"][INTERFACES] = _long_list(50_000)
    return json.dumps(review, separators=(",", ":")).encode()


def _pod_attack() -> bytes:
    review = _review("served-pod.json")
    review["request"]["uid"] = "attack-pod"
    annotations = review["request"]["object"]["metadata"]["annotations"]
    annotations[INTERFACES] = _long_list(250 * 1024 // 44)  # 44 characters an entry
    return json.dumps(review).encode()


def _legit_pod() -> bytes:
    review = _review("served-pod.json")
    review["request"]["uid"] = "legit-pod"
    return json.dumps(review).encode()


BODIES: Final = {
    "jobset-attack": _jobset_attack(),
    "pod-attack": _pod_attack(),
    "abandon-jobset": costly_jobset_update(Edit.BROKEN, templates=1_000, uid="abandoned"),
    # A copy the YAML reader parses to its bound (~60 KiB: under the judging thread's 64 KiB).
    "abandon-yaml": configmap_review_body(
        "job-runtime-snapshot", {"runtime": empty_maps(count=19_000)}
    ),
    "legit-jobset": json.dumps(
        _created(costly_jobset_update(Edit.CLEAN, templates=50), "legit-jobset")
    ).encode(),
    "legit-pod": _legit_pod(),
    "legit-snapshot": configmap_review_body("job-runtime-snapshot", {"runtime": EXAMPLE_RUNTIME}),
}
EXPECTED: Final = {"legit-jobset": (True, ""), "legit-pod": (True, "")}

Answer = tuple[str, int, object, float]
"""What was sent, the HTTP status (0: closed unanswered), the verdict or error, the seconds."""


def _post(connection: http.client.HTTPSConnection, what: str) -> Answer:
    started = time.perf_counter()
    try:
        connection.request(
            "POST", "/validate", body=BODIES[what], headers={"Content-Type": "application/json"}
        )
        reply = connection.getresponse()
        answer = reply.read()
    except (OSError, http.client.HTTPException) as error:
        connection.close()  # the next request reconnects
        return what, 0, repr(error), time.perf_counter() - started
    took = time.perf_counter() - started
    if reply.status != 200:
        return what, reply.status, answer[:200], took
    response = json.loads(answer)["response"]
    violations = response.get("auditAnnotations", {}).get("violations", "")
    return what, 200, (response["allowed"] is True, violations), took


def _connection(server: LiveServe) -> http.client.HTTPSConnection:
    return http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=server.context, timeout=CLIENT_TIMEOUT_S
    )


def _sending(server: LiveServe, what: str, rounds: int) -> Callable[[], list[Answer]]:
    def send() -> list[Answer]:
        connection = _connection(server)
        try:
            return [_post(connection, what) for _ in range(rounds)]
        finally:
            connection.close()

    return send


def _abandoning(server: LiveServe, what: str, rounds: int) -> Callable[[], int]:
    """Posts ``what`` and closes the connection ``ABANDON_S`` later, unanswered; how many were
    sent whole."""

    def abandon() -> int:
        sent = 0
        for _ in range(rounds):
            raw = socket.create_connection(("127.0.0.1", server.port), timeout=CLIENT_TIMEOUT_S)
            with server.context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                body = BODIES[what]
                head = (
                    b"POST /validate HTTP/1.1\r\nHost: nicguard\r\n"
                    b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                )
                try:
                    tls.sendall(head + body)
                except (OSError, ssl.SSLError):
                    continue  # closed by the body budget while arriving
                sent += 1
                time.sleep(ABANDON_S)  # the client giving up: what it does, not a synchronisation
        return sent

    return abandon


def _metric(server: LiveServe, name: str) -> dict[str, float]:
    probe = http.client.HTTPConnection("127.0.0.1", server.probe_port, timeout=CLIENT_TIMEOUT_S)
    try:
        probe.request("GET", "/metrics")
        text = probe.getresponse().read().decode()
    finally:
        probe.close()
    return {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line.startswith(name)
    }


def _log_lines(server: LiveServe) -> list[dict[str, Any]]:
    lines = []
    for line in server.log_text().splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServe]:
    with live_serve(tmp_path) as served:
        yield served


def test_writers_of_costly_and_abandoned_reviews_refuse_no_one_elses(server: LiveServe) -> None:
    pid = server.process.pid
    done = threading.Event()
    statuses: list[int | None] = []
    probes: list[float] = []
    peak = [memory_kib(pid)["VmRSS"]]
    rss_before = peak[0]

    def poll() -> None:
        while not done.is_set():
            started = time.perf_counter()
            statuses.append(http_status(f"{server.probes}/healthz"))  # None: nothing within 5 s
            probes.append(time.perf_counter() - started)
            peak[0] = max(peak[0], memory_kib(pid)["VmRSS"])
            done.wait(0.05)

    def legit() -> list[Answer]:
        connection = _connection(server)
        try:
            return [
                _post(connection, what)
                for _ in range(ROUNDS["legit"])
                for what in ("legit-jobset", "legit-pod", "legit-snapshot")
            ]
        finally:
            connection.close()

    workers = sum(SENDERS.values()) + LEGIT_CLIENTS + 1
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        poller = pool.submit(poll)
        try:
            attacks = [
                pool.submit(_sending(server, what, ROUNDS[what]))
                for what in ("jobset-attack", "pod-attack")
                for _ in range(SENDERS[what])
            ]
            abandons = [
                pool.submit(_abandoning(server, what, ROUNDS["abandon"]))
                for what in ("abandon-jobset", "abandon-yaml")
                for _ in range(SENDERS[what])
            ]
            legits = [pool.submit(legit) for _ in range(LEGIT_CLIENTS)]
            legit_answers = [a for f in legits for a in f.result()]
            attack_answers = [a for f in attacks for a in f.result()]
            abandoned = sum(f.result() for f in abandons)
        finally:
            done.set()
        poller.result()
    elapsed = time.perf_counter() - started

    dropped = _metric(server, "nicguard_reviews_dropped_total")
    decided = Counter(
        line["admission_uid"]
        for line in _log_lines(server)
        if line.get("event_type") == "admission_decision"
    )
    outcomes = Counter(
        (what, status, verdict if status == 200 else "refused")
        for what, status, verdict, _ in attack_answers
    )
    took = {
        what: [a[3] for a in legit_answers if a[0] == what]
        for what in ("legit-jobset", "legit-pod", "legit-snapshot")
    }
    print(  # noqa: T201 - the numbers RELIABILITY.md records (-rP)
        f"RELIABILITY costly writers (TLS): {elapsed:.1f} s; attacks {dict(outcomes)}; "
        f"{abandoned} abandoned after {ABANDON_S} s, dropped {dropped}, "
        f"judged {decided['abandoned']} JobSet UPDATEs; legit "
        + ", ".join(
            f"{what} {len(t)} p50 {statistics.median(t) * 1000:.0f} ms max {max(t) * 1000:.0f} ms"
            for what, t in took.items()
        )
        + f"; /healthz {len(probes)} polls, max {max(probes) * 1000:.0f} ms; "
        f"RSS {rss_before / 1024:.0f} -> peak {peak[0] / 1024:.0f} MiB"
    )

    # Every legitimate review answered with its verdict: none refused or closed.
    assert [a for a in legit_answers if a[1] != 200] == []
    assert [a[:3] for a in legit_answers if a[0] in EXPECTED and a[2] != EXPECTED[a[0]]] == []
    assert len(legit_answers) == LEGIT_CLIENTS * ROUNDS["legit"] * 3
    # Every long list denied from its length, or its own body refused for the budget (503, or
    # closed while it arrived): never allowed, never judged as a list.
    for (what, status, verdict), _count in outcomes.items():
        assert status in (0, 200, 503), what
        if status == 200:
            assert verdict == (False, "InterfacesAnnotationMalformed"), what
    for what in ("jobset-attack", "pod-attack"):
        assert outcomes[(what, 200, (False, "InterfacesAnnotationMalformed"))] >= 1, outcomes
    assert sum(outcomes.values()) == sum(
        ROUNDS[what] * SENDERS[what] for what in ("jobset-attack", "pod-attack")
    )
    # Abandoned reviews: dropped, and no review judged more than once.
    judging = dropped['nicguard_reviews_dropped_total{queue="judging"}']
    assert judging >= 1, dropped
    assert decided["abandoned"] + judging <= SENDERS["abandon-jobset"] * ROUNDS["abandon"]
    assert statuses, "/healthz was never polled"
    assert set(statuses) == {200}
    assert peak[0] / 1024 <= RSS_BOUND_MIB
    assert server.process.running()
