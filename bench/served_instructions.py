"""Instructions per request of the whole served path, TLS and connections included, by callgrind.

``nicguard serve`` (file mode on examples/cluster, as ``make run`` serves it) and the bare echo
on nicguard's stack (``bench.echo_app``) each run under callgrind; a client outside it posts
reviews over a few keep-alive TLS connections, and only windows of steady state are counted.

    python -m bench.served_instructions [--requests N] [--connections C] [--reviews ...]
        [--servers nicguard echo] [--rounds R] [--root CHECKOUT] [--keep DIR] [--cache-sim]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Final

from app.certificates.certdir import ensure_cert_dir
from bench.run import free_port, stop

ROOT: Final = Path(__file__).resolve().parents[1]
REVIEWS: Final = ("good-runtime", "served-pod", "drifted-runtime")
SERVERS: Final = ("nicguard", "echo")
WARM_UP: Final = 60  # requests per connection before the window
IDLE_SECONDS: Final = 10.0  # a window without requests: what timers alone cost per second
_HOST: Final = "127.0.0.1"
# In the server, a thread nothing else runs calls these on a line on its stdin: callgrind zeroes
# its counts on entering getppid and dumps them on entering getpgrp (as bench.instructions does),
# so a dump holds the window alone, every thread of the process included.
_MARKERS: Final = """
import os, runpy, sys, threading
ack = os.fdopen(int(os.environ.pop("NICGUARD_MARK_ACK")), "w")
def mark():
    for line in sys.stdin:
        (os.getppid if line.startswith("zero") else os.getpgrp)()
        ack.write(line)
        ack.flush()
threading.Thread(target=mark, name="callgrind-marks", daemon=True).start()
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""
# Shared objects grouped into the layers they implement (the first pattern that matches wins).
LAYERS: Final = (
    ("OpenSSL", re.compile(r"/lib(ssl|crypto)\.so")),
    ("Python ssl module", re.compile(r"/_ssl\.cpython")),
    ("stdlib C modules (_json, ...)", re.compile(r"/lib-dynload/")),
    ("uvloop + libuv", re.compile(r"/uvloop/")),
    ("httptools", re.compile(r"/httptools/")),
    ("orjson", re.compile(r"/orjson")),
    ("CPython (all Python code)", re.compile(r"/libpython|/python3")),
    ("libc", re.compile(r"/libc\.so|/libc-")),
    ("kernel entry (vdso) + loader", re.compile(r"vdso|/ld-linux")),
)
OTHER: Final = "other"


@dataclass(frozen=True, slots=True)
class Profile:
    """One dump: the instructions counted, in total, by the shared object that ran them, and
    inclusively in each function called (summed over its call sites: exact when it does not
    recurse)."""

    total: int
    by_object: dict[str, int]
    called: dict[str, int]
    events: dict[str, int] = field(default_factory=dict)
    """Every event's total (cache misses too, with ``--cache-sim``)."""

    def by_layer(self) -> dict[str, int]:
        layers: Counter[str] = Counter()
        for obj, cost in self.by_object.items():
            layers[layer_of(obj)] += cost
        return dict(layers)


def layer_of(obj: str) -> str:
    return next((name for name, pattern in LAYERS if pattern.search(obj)), OTHER)


def parse_callgrind(text: str) -> Profile:
    """Total Ir and self Ir per object (``ob=``) of a callgrind dump without ``--dump-instr``.

    The cost line after a ``calls=`` line is the call's inclusive cost, counted by the callee
    where it ran: it is skipped here, so the self costs add up to the total.
    """
    objects: dict[str, str] = {}
    functions: dict[str, str] = {}
    by_object: Counter[str] = Counter()
    called: Counter[str] = Counter()
    total: int | None = None
    events: dict[str, int] = {}
    names: list[str] = []
    obj, callee, in_call = "", "", False
    for line in text.splitlines():
        if not line:
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            fields = line.split()
            cost = int(fields[1]) if len(fields) > 1 else 0
            if in_call:
                called[callee] += cost
                in_call = False
            else:
                by_object[obj] += cost
        elif line.startswith("ob="):
            obj = _name(line[3:], objects)
        elif line.startswith("cob="):  # the callee's object: shares the names of ob=
            _name(line[4:], objects)
        elif line.startswith("fn="):
            _name(line[3:], functions)
        elif line.startswith("cfn="):
            callee = _name(line[4:], functions)
        elif line.startswith("calls="):
            in_call = True
        elif line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith("totals:"):
            events = dict(zip(names, map(int, line.split()[1:]), strict=False))
            total = int(line.split()[1])
    if total is None:
        raise ValueError("no totals: line in the callgrind output")
    return Profile(total=total, by_object=dict(by_object), called=dict(called), events=events)


def _name(spec: str, names: dict[str, str]) -> str:
    """``(id) name`` defines a compressed name, ``(id)`` refers to it, a bare name is itself."""
    if not spec.startswith("("):
        return spec
    key, _, name = spec.partition(")")
    if name:
        names[key] = name.strip()
    return names[key]


# --- the server under callgrind -------------------------------------------------------------


@dataclass(slots=True)
class _Served:
    process: subprocess.Popen[bytes]
    acks: IO[str]
    port: int
    probe: int | None
    out: Path
    dumps: int = 0

    def zero(self) -> None:
        self._mark("zero")

    def dump(self) -> Profile:
        self._mark("dump")
        self.dumps += 1
        return parse_callgrind(Path(f"{self.out}.{self.dumps}").read_text())

    def _mark(self, what: str) -> None:
        if self.process.stdin is None:
            raise RuntimeError("the server's stdin is not a pipe")
        self.process.stdin.write(f"{what}\n".encode())
        self.process.stdin.flush()
        if self.acks.readline().strip() != what:
            raise RuntimeError(f"the server did not {what} its counts")


def _argv(server: str, port: int, probe: int, cert: Path, key: Path) -> list[str]:
    tls = [f"--tls-cert={cert}", f"--tls-key={key}", f"--host={_HOST}", f"--port={port}"]
    if server == "echo":
        return ["bench.echo_app", *tls]
    return ["app", "serve", "--state=examples/cluster", f"--probe-port={probe}", *tls]


_AUDITED: Final = re.compile(r"^nicguard_audit_last_change_timestamp_seconds ([0-9.e+]+)$", re.M)


async def _audited(probe: int, deadline: float) -> None:
    """Until file mode's one audit pass (on its own thread, once the state settles) is done:
    start-up work, not a request's."""
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            reader, writer = await asyncio.open_connection(_HOST, probe)
            writer.write(
                f"GET /metrics HTTP/1.1\r\nHost: {_HOST}\r\nConnection: close\r\n\r\n".encode()
            )
            text = (await reader.read()).decode(errors="replace")
            writer.close()
            found = _AUDITED.search(text)
            if found is None and "HTTP/1.1 200" in text:
                return  # a build without the metric: nothing to wait for
            if found is not None and float(found[1]) > 0:
                return
        await asyncio.sleep(1)
    raise RuntimeError("nicguard's audit pass did not finish in time")


@contextlib.contextmanager
def _serving(
    server: str, root: Path, work: Path, cert: Path, key: Path, *, cache_sim: bool
) -> Iterator[_Served]:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("bench.served_instructions: valgrind is not on PATH (package valgrind)")
    port, probe, out = free_port(), free_port(), work / f"callgrind.{server}"
    read_ack, write_ack = os.pipe()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NICGUARD_")}
    env |= {"PYTHONPATH": str(root), "NICGUARD_MARK_ACK": str(write_ack)}
    argv = [
        valgrind,
        "--tool=callgrind",
        "--zero-before=getppid",
        "--dump-before=getpgrp",
        f"--cache-sim={'yes' if cache_sim else 'no'}",
        f"--callgrind-out-file={out}",
        sys.executable,
        "-c",
        _MARKERS,
        *_argv(server, port, probe, cert, key),
    ]
    with (work / f"{server}.log").open("wb") as log:
        process = subprocess.Popen(  # noqa: S603 - valgrind on our interpreter and entry points
            argv,
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=log,
            pass_fds=(write_ack,),
        )
    os.close(write_ack)
    with os.fdopen(read_ack) as acks:
        try:
            yield _Served(process, acks, port, None if server == "echo" else probe, out)
        finally:
            stop(process, timeout=60)  # callgrind writes its last dump on the way out


# --- the client, outside callgrind ----------------------------------------------------------


def _request(body: bytes, port: int) -> bytes:
    """What wrk sends with bench/post.lua."""
    head = (
        f"POST /validate HTTP/1.1\r\nHost: {_HOST}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> bytes:
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    if not head.startswith(b"HTTP/1.1 200 ") or length is None:
        raise RuntimeError(f"unexpected answer: {head[:200]!r}")
    return await reader.readexactly(int(length[1]))


class _Client:
    """``connections`` keep-alive TLS connections, each posting one request at a time."""

    def __init__(self, port: int, ca: Path, connections: int) -> None:
        self._port, self._ca, self._count = port, ca, connections
        self._connections: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def open(self, deadline: float) -> None:
        context = ssl.create_default_context(cafile=str(self._ca))
        while len(self._connections) < self._count:
            try:
                pair = await asyncio.open_connection(_HOST, self._port, ssl=context)
            except OSError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
                continue
            self._connections.append(pair)

    async def post(self, body: bytes, requests: int) -> list[bytes]:
        """``requests`` posts of ``body``, spread over the connections; the answers."""
        request = _request(body, self._port)
        share = [requests // self._count + (i < requests % self._count) for i in range(self._count)]

        async def one(index: int) -> list[bytes]:
            reader, writer = self._connections[index]
            return [await _exchange(reader, writer, request) for _ in range(share[index])]

        answers = await asyncio.gather(*(one(i) for i in range(self._count)))
        return [answer for batch in answers for answer in batch]

    def close(self) -> None:
        for _, writer in self._connections:
            writer.close()


# --- a count ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Count:
    """One review's window: ``requests`` posts in ``seconds`` of wall-clock time (dilated by
    callgrind), and what the server does meanwhile on timers alone (``idle_per_second``)."""

    server: str
    review: str
    requests: int
    allowed: bool
    profile: Profile
    seconds: float
    idle_per_second: float = 0.0

    @property
    def per_request(self) -> float:
        return self.profile.total / self.requests

    @property
    def timers_per_request(self) -> float:
        """Work on timers (uvicorn's 0.1 s tick, nicguard's 10 s sweep) during the window: a
        few ticks per request under callgrind's ~50x slow-down, ~none at full speed."""
        return self.idle_per_second * self.seconds / self.requests


@dataclass(frozen=True, slots=True)
class Window:
    """What is counted: ``requests`` posts of each review over ``connections`` connections, by
    the server in the checkout ``root``, its dumps in ``work``."""

    requests: int
    connections: int
    root: Path
    work: Path
    cache_sim: bool = False
    rounds: int = 2


def count(server: str, reviews: Sequence[str], window: Window) -> list[Count]:
    """Each review's window, counted in one server process."""
    requests, connections, work = window.requests, window.connections, window.work
    files = ensure_cert_dir(work / "certs", [_HOST])
    counts = []
    cache_sim = window.cache_sim
    with _serving(server, window.root, work, files.cert, files.key, cache_sim=cache_sim) as served:
        client = _Client(served.port, files.ca, connections)

        async def run() -> float:
            await client.open(time.monotonic() + 600)
            try:
                if served.probe is not None:
                    await _audited(served.probe, time.monotonic() + 600)
                for review in reviews:
                    body = (ROOT / "examples" / "reviews" / f"{review}.json").read_bytes()
                    answers = await client.post(body, WARM_UP * connections)
                    allowed = json.loads(answers[0])["response"]["allowed"]
                    for _ in range(window.rounds):
                        served.zero()
                        started = time.monotonic()
                        await client.post(body, requests)
                        seconds = time.monotonic() - started
                        profile = served.dump()
                        counts.append(Count(server, review, requests, allowed, profile, seconds))
                served.zero()
                await asyncio.sleep(IDLE_SECONDS)
                return served.dump().total / IDLE_SECONDS
            finally:
                client.close()

        idle = asyncio.run(run())
    return [replace(c, idle_per_second=idle) for c in counts]


# Functions whose inclusive cost is reported beside the layers (callgrind's names).
CALLED: Final = (
    ("orjson.loads", "loads"),
    ("orjson.dumps", "dumps"),
    ("garbage collections", "gc_collect_main"),
    ("  of which gc.collect() on a timer", "gc_collect"),
)


def report(counts: Sequence[Count], out: IO[str]) -> None:
    for c in counts:
        out.write(
            f"{c.server:<9}{c.review:<14} allowed={c.allowed!s:<5}"
            f"{c.per_request / 1000:9.1f} kIr/request ({c.requests} requests); on timers "
            f"{c.timers_per_request / 1000:.1f} kIr/request of it "
            f"({c.idle_per_second / 1000:.0f} kIr/s idle x {c.seconds:.1f} s)\n"
        )
        layers = sorted(c.profile.by_layer().items(), key=lambda kv: -kv[1])
        for name, cost in layers:
            share = cost / c.profile.total * 100
            out.write(f"    {name:<34}{cost / c.requests / 1000:9.1f} kIr {share:5.1f} %\n")
        out.write("    inclusive:\n")
        for label, function in CALLED:
            cost = c.profile.called.get(function, 0)
            out.write(f"    {label:<34}{cost / c.requests / 1000:9.1f} kIr\n")
        if misses := {k: v for k, v in c.profile.events.items() if k != "Ir"}:
            each = ", ".join(f"{k} {v / c.requests / 1000:.2f}" for k, v in misses.items())
            out.write(f"    cache misses (k/request): {each}\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="served instructions per request, callgrind")
    parser.add_argument("--requests", type=int, default=400, help="counted posts (<= 10^5)")
    parser.add_argument("--connections", type=int, default=4, help="keep-alive connections")
    parser.add_argument("--reviews", nargs="+", choices=REVIEWS, default=list(REVIEWS))
    parser.add_argument("--servers", nargs="+", choices=SERVERS, default=list(SERVERS))
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to serve from")
    parser.add_argument("--keep", type=Path, help="keep the callgrind dumps in this directory")
    parser.add_argument("--cache-sim", action="store_true", help="count cache misses too")
    parser.add_argument(
        "--rounds", type=int, default=2, help="windows per review (<= 10; the first counts more)"
    )
    args = parser.parse_args(argv)
    if not (
        1 <= args.requests <= 100_000 and 1 <= args.connections <= 64 and 1 <= args.rounds <= 10
    ):
        parser.error("--requests in 1..10^5, --connections in 1..64, --rounds in 1..10")
    with tempfile.TemporaryDirectory(prefix="nicguard-served-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        window = Window(
            args.requests, args.connections, args.root.resolve(), work, args.cache_sim, args.rounds
        )
        for server in args.servers:
            report(count(server, args.reviews, window), sys.stdout)
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
