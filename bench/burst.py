"""Admission under a burst through a real kube-apiserver: TrainJob creates from parallel clients,
the apiserver's own time in each validating webhook call, nicguard beside bare echo webhooks.

    NICGUARD_K8S_BIN_DIR="$(scripts/k8s-bins.sh)" python -m bench.burst [--creates 1000]
        [--clients 20] [--rounds 3]    # exit 1 only when a run errors or cannot be measured
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import queue
import re
import secrets
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final, TextIO

from bench.e2e import (
    NAMESPACE as SWITCH_NAMESPACE,
    ApiClient,
    E2EBenchError,
    Switch,
    echo_servers,
    go_build,
    listening,
)
from bench.run import free_port, load_average, machine
from tests.harness.controlplane import ControlPlane
from tests.harness.objects import trainjob
from tests.harness.procs import Process, wait_until
from tests.harness.stack import Stack, populate, running
from tests.harness.state import create_namespace

NAMESPACE: Final = "bench-burst"
RUNTIME: Final = "torch-distributed-tcpxo"  # examples/cluster: recipe-bound, judged in full
MODES: Final = ("nicguard", "echo", "go-echo")
_TRAINJOBS: Final = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NAMESPACE}/trainjobs"
_CALL_SPAN: Final = "Call validating webhook"  # k8s.io/apiserver validating dispatcher, callHook
_LATENCY: Final = "apiserver.latency.k8s.io/validating-webhook"
_WARMUP: Final = 5  # unmeasured, untraced creates per client before each burst
_SPANS_TIMEOUT: Final = 60.0  # the apiserver's span exporter batches every 5 s
_DURATION: Final = re.compile(r"([0-9.]+)(h|ms|m|s|us|µs|ns)")
_MS: Final = {"h": 3_600_000.0, "m": 60_000.0, "s": 1000.0, "ms": 1.0, "us": 1e-3, "µs": 1e-3}


class BurstError(Exception):
    """The burst could not run or could not be measured."""


@dataclass(frozen=True, slots=True)
class Sent:
    """One measured create as the client saw it; ``parent`` is the span id of its traceparent."""

    name: str
    trace: str
    parent: str
    client_ms: float


@dataclass(frozen=True, slots=True)
class Measured:
    """One create as the apiserver measured it (its spans), with what else is known of it."""

    sent: Sent
    total_ms: float  # the apiserver's request span: received to handler done
    call_ms: float  # the longest "Call validating webhook" span (the tracker keeps the max)
    post_ms: float | None  # its HTTP client span: the round trip to the webhook
    annotation_ms: float | None  # apiserver.latency.k8s.io/validating-webhook, when written
    decision_ms: float | None  # nicguard's own duration_ms for it (nicguard only)


@dataclass(slots=True)
class Burst:
    mode: str
    seconds: float
    sent: list[Sent]
    measured: list[Measured] = field(default_factory=list)
    audited: int = 0  # creates with a ResponseComplete audit event


def _say(out: TextIO, text: str = "") -> None:
    out.write(text + "\n")
    out.flush()


def go_duration_ms(text: str) -> float:
    """A Go ``time.Duration.String()`` ("1.5ms", "812.3µs", "1m2.5s") in milliseconds."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(number) * _MS.get(unit, 1e-6) for number, unit in parts)


def percentile(values: Sequence[float], pct: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


@contextlib.contextmanager
def span_sink(workdir: Path) -> Iterator[tuple[str, Path]]:
    """The OTLP/gRPC receiver running: (its ``host:port``, the JSON-lines file of spans)."""
    binary = workdir / "otlpsink"
    go_build("otlpsink", binary)
    port = free_port()
    spans = workdir / "spans.jsonl"
    process = Process(
        "otlpsink", [str(binary), f"127.0.0.1:{port}", str(spans)], workdir / "sink.log"
    )
    try:
        wait_until(partial(listening, port), timeout=30, what="otlpsink", diagnose=process.report)
        yield f"127.0.0.1:{port}", spans
    finally:
        process.stop()


class Spans:
    """The sink's file, read as it grows: span dicts by trace id."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.by_trace: dict[str, list[dict[str, Any]]] = {}

    def read(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as lines:
            lines.seek(self.offset)
            for line in lines:
                if not line.endswith(b"\n"):
                    break  # a line still being written: read it next time
                self.offset += len(line)
                span = json.loads(line)
                self.by_trace.setdefault(span["trace"], []).append(span)

    def timing(self, sent: Sent) -> tuple[float, float, float | None] | None:
        """(request ms, webhook call ms, its HTTP round trip ms) once both spans are in."""
        spans = self.by_trace.get(sent.trace, [])
        server = [s for s in spans if s["parent"] == sent.parent]
        calls = [s for s in spans if s["name"] == _CALL_SPAN]
        if not server or not calls:
            return None
        call = max(calls, key=lambda s: s["end"] - s["start"])
        posts = [s for s in spans if s["parent"] == call["span"]]
        post = (posts[0]["end"] - posts[0]["start"]) / 1e6 if posts else None
        return (
            (server[0]["end"] - server[0]["start"]) / 1e6,
            (call["end"] - call["start"]) / 1e6,
            post,
        )


def fire(plane: ControlPlane, mode: str, number: int, creates: int, clients: int) -> Burst:
    """``creates`` TrainJob creates from ``clients`` threads, each on its own keep-alive HTTPS
    connection as admin, each create with a sampled traceparent of its own."""
    prefix = f"tj-{mode}-{number}"
    template = trainjob(prefix, NAMESPACE, RUNTIME)
    work: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
    for index in range(creates):  # built before the burst: the clients only send
        job = copy.deepcopy(template)
        job["metadata"]["name"] = f"{prefix}-{index:04d}"
        work.put(job)
    start = threading.Barrier(clients + 1)
    admin = plane.users["admin"].token

    def client(which: int) -> list[Sent]:
        api = ApiClient("127.0.0.1", plane.port, plane.ca_file, admin)
        try:
            try:
                for warm in range(_WARMUP):
                    name = f"{prefix}-w{which:02d}-{warm}"
                    status, payload, _ = api.post(_TRAINJOBS, trainjob(name, NAMESPACE, RUNTIME))
                    if status != 201:
                        raise BurstError(f"warm-up create {name}: HTTP {status} {payload[:300]!r}")
            except BaseException:
                start.abort()  # the others and the caller stop waiting
                raise
            start.wait()
            sent: list[Sent] = []
            while True:
                try:
                    job = work.get_nowait()
                except queue.Empty:
                    return sent
                name = job["metadata"]["name"]
                trace, parent = secrets.token_hex(16), secrets.token_hex(8)
                headers = {"traceparent": f"00-{trace}-{parent}-01"}
                status, payload, seconds = api.post(_TRAINJOBS, job, headers)
                if status != 201:
                    raise BurstError(f"create {name} under {mode}: HTTP {status} {payload[:300]!r}")
                sent.append(Sent(name, trace, parent, seconds * 1000))
        finally:
            api.close()

    with ThreadPoolExecutor(max_workers=clients) as pool:
        futures = [pool.submit(client, which) for which in range(clients)]
        with contextlib.suppress(threading.BrokenBarrierError):  # a client failed: see below
            start.wait(timeout=120)
        started = time.perf_counter()
        errors = [f.exception() for f in futures]
        seconds = time.perf_counter() - started
    causes = [
        e for e in errors if e is not None and not isinstance(e, threading.BrokenBarrierError)
    ]
    if causes or any(errors):
        raise causes[0] if causes else BurstError(f"the {mode} burst's clients did not start")
    return Burst(mode, seconds, [s for f in futures for s in f.result()])


def audit_latencies(plane: ControlPlane, names: set[str]) -> tuple[int, dict[str, float]]:
    """How many of the creates of ``names`` have a ResponseComplete audit event, and per name
    its ``apiserver.latency.k8s.io/validating-webhook`` annotation where the apiserver wrote one
    (only for requests over 500 ms: k8s.io/apiserver, filters/audit.go)."""
    seen: set[str] = set()
    found: dict[str, float] = {}
    for event in plane.audit_events():
        ref = event.get("objectRef")
        if event.get("stage") != "ResponseComplete" or event.get("verb") != "create":
            continue
        if not isinstance(ref, dict) or ref.get("resource") != "trainjobs":
            continue
        name, annotations = str(ref.get("name")), event.get("annotations")
        if name not in names:
            continue
        seen.add(name)
        if isinstance(annotations, dict) and _LATENCY in annotations:
            found[name] = go_duration_ms(str(annotations[_LATENCY]))
    return len(seen), found


def collect(stack: Stack, burst: Burst, spans: Spans) -> None:
    """Wait for every create's spans (or ``_SPANS_TIMEOUT``), then join them with the audit log
    and nicguard's decision log."""
    deadline = time.monotonic() + _SPANS_TIMEOUT
    while True:
        spans.read()
        timings = {s.name: spans.timing(s) for s in burst.sent}
        if all(t is not None for t in timings.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    names = {s.name for s in burst.sent}
    burst.audited, annotations = audit_latencies(stack.plane, names)
    decisions: dict[str, float] = {}
    if burst.mode == "nicguard":
        for entry in stack.nicguard.decisions():
            if entry.get("resource_namespace") == NAMESPACE and entry.get("resource_name") in names:
                decisions[str(entry["resource_name"])] = float(entry["duration_ms"])
    for sent in burst.sent:
        timing = timings[sent.name]
        if timing is not None:
            total, call, post = timing
            annotation, decision = annotations.get(sent.name), decisions.get(sent.name)
            burst.measured.append(Measured(sent, total, call, post, annotation, decision))


def _pct(values: Sequence[float]) -> str:
    """``p50 / p99`` of ``values`` (ms), or a dash."""
    if not values:
        return "-"
    return f"{percentile(values, 50):.2f} / {percentile(values, 99):.2f}"


def _ratio(ours: Sequence[float], theirs: Sequence[float]) -> str:
    p50 = percentile(ours, 50) / percentile(theirs, 50)
    return f"p50 {p50:.2f}x, p99 {percentile(ours, 99) / percentile(theirs, 99):.2f}x"


def report(bursts: Sequence[Burst], out: TextIO) -> bool:
    """Per configuration, pooled over its bursts; False when a create lacks its spans."""
    modes = list(dict.fromkeys(b.mode for b in bursts))
    rows = {m: [x for b in bursts if b.mode == m for x in b.measured] for m in modes}
    sent = {m: sum(len(b.sent) for b in bursts if b.mode == m) for m in modes}
    _say(out)
    _say(
        out, "p50 / p99, ms       webhook call       apiserver request  client create      share %"
    )
    for mode in modes:
        got = rows[mode]
        shares = [m.call_ms / m.total_ms * 100 for m in got]
        _say(
            out,
            f"{mode:<10} {_pct([m.call_ms for m in got]):>18} {_pct([m.total_ms for m in got]):>18}"
            f" {_pct([m.sent.client_ms for m in got]):>18} {_pct(shares):>14}",
        )
    for mode in modes:
        got = rows[mode]
        seconds = sum(b.seconds for b in bursts if b.mode == mode)
        posts = [m.post_ms for m in got if m.post_ms is not None]
        audited = sum(b.audited for b in bursts if b.mode == mode)
        annotated = [m.annotation_ms for m in got if m.annotation_ms is not None]
        _say(
            out,
            f"{mode}: {len(got)} of {sent[mode]} creates with both spans,"
            f" {sent[mode] / seconds:.0f} creates/s; HTTP round trip in the call {_pct(posts)} ms;"
            f" {audited} audit events,"
            f" {len(annotated)} with {_LATENCY} (requests over 500 ms) {_pct(annotated)} ms",
        )
    every = [m for got in rows.values() for m in got]
    both = [(m.annotation_ms, m.call_ms) for m in every if m.annotation_ms is not None]
    if both:  # the tracker behind the annotation and the span time the same call
        gaps = [abs(note - call) for note, call in both]
        _say(
            out,
            f"the {len(both)} annotations vs the call span of the same request: largest gap"
            f" {max(gaps):.3f} ms, median {statistics.median(gaps):.3f} ms",
        )
    nicguard, echo = rows.get("nicguard", []), rows.get("echo", [])
    decided = [m.decision_ms for m in nicguard if m.decision_ms is not None]
    if decided:
        _say(out, f"nicguard's own duration_ms (its decision log): {_pct(decided)} ms")
    if nicguard and echo:
        calls = _ratio([m.call_ms for m in nicguard], [m.call_ms for m in echo])
        creates = _ratio([m.sent.client_ms for m in nicguard], [m.sent.client_ms for m in echo])
        _say(out, f"nicguard / FastAPI echo: webhook call {calls}; client create {creates}")
    return all(rows[m] and len(rows[m]) == sent[m] for m in modes)


def measure(stack: Stack, spans: Spans, args: argparse.Namespace, out: TextIO) -> list[Burst]:
    plane = stack.plane
    create_namespace(plane, NAMESPACE)
    create_namespace(plane, SWITCH_NAMESPACE)  # where Switch proves which webhook is in effect
    bursts: list[Burst] = []
    switch_client = ApiClient("127.0.0.1", plane.port, plane.ca_file, plane.users["alice"].token)
    with echo_servers(stack, out) as echo_urls:
        modes = [m for m in MODES if m == "nicguard" or m in echo_urls]
        switch = Switch(stack, switch_client, {}, echo_urls)
        try:
            for number in range(args.rounds):
                shift = number % len(modes)
                for mode in modes[shift:] + modes[:shift]:
                    switch.to(mode)
                    burst = fire(plane, mode, number, args.creates, args.clients)
                    collect(stack, burst, spans)
                    bursts.append(burst)
                    calls = [m.call_ms for m in burst.measured]
                    _say(
                        out,
                        f"  round {number + 1} {mode:<8} {len(burst.sent)} creates in"
                        f" {burst.seconds:5.1f}s; webhook call p50/p99 {_pct(calls)} ms"
                        f" ({len(burst.measured)} with spans)",
                    )
        finally:
            switch_client.close()
    return bursts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.burst", description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=1000, help="measured creates per burst")
    parser.add_argument("--clients", type=int, default=20, help="parallel clients per burst")
    parser.add_argument("--rounds", type=int, default=3, help="bursts per configuration")
    args = parser.parse_args(argv)
    if not (1 <= args.creates <= 10000 and 1 <= args.clients <= 100 and 1 <= args.rounds <= 10):
        parser.error("--creates must be in 1..10000, --clients in 1..100, --rounds in 1..10")
    out = sys.stdout
    _say(out, "machine: " + ", ".join(f"{k} {v}" for k, v in machine().items()))
    try:
        with (
            tempfile.TemporaryDirectory(prefix="nicguard-bench-burst-") as tmp,
            span_sink(Path(tmp)) as (endpoint, spans_file),
            running(Path(tmp), otlp_endpoint=endpoint) as stack,
        ):
            _say(out, f"control plane: {stack.plane.versions()}")
            populate(stack)
            _say(
                out,
                f"{args.rounds} burst(s) per configuration of {args.creates} TrainJob creates from"
                f" {args.clients} clients (+{_WARMUP} unmeasured each), order rotated each round,"
                f" load average {load_average()}",
            )
            bursts = measure(stack, Spans(spans_file), args, out)
            ok = report(bursts, out)
    except (BurstError, E2EBenchError, RuntimeError, AssertionError, OSError, ValueError) as error:
        _say(sys.stderr, f"bench.burst: {error}")
        return 1
    _say(out, f"load average at the end: {load_average()}")
    _say(out, "bench.burst: " + ("measured" if ok else "FAIL: measurement incomplete"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
