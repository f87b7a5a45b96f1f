"""``make bench``: is nicguard fast? Against a Go webhook, the first Python webhook, its own stack.

1. Generates a self-signed CA and serving certificate in a temporary directory.
2. Starts, on free loopback ports with the same certificate: ``nicguard serve --state
   examples/cluster``; the bare Go echo (``bench/goecho``, built with ``go build``); the bare
   FastAPI echo (``bench.echo_app``) on uvicorn's defaults, h11 and asyncio (``uvicorn app:app``
   without the ``standard`` extras); and the same echo on nicguard's stack, httptools on uvloop.
   Checks each answers the review as expected, and warms each up.
3. Each round, for each review (the drifted runtime: a denial; the good runtime: an allow),
   runs ``wrk --latency -s bench/post.lua`` against the servers in turn, their order rotating
   from round to round: one connection, one request at a time (as the apiserver calls a webhook)
   against the Go echo and nicguard; then ``--connections`` keep-alive connections against both
   FastAPI echoes and nicguard. Reports the medians of Requests/sec, the 50 %/99 % latencies and
   the server's CPU per request, and the ratios the targets (SPEC §10) are set on.
4. Starts nicguard alone on a generated file-mode state of 10,000 objects (1,000 Networks, their
   1,000 GKENetworkParamSets, 8,000 runtimes) and reads VmRSS once ready and after a load round.

Exit status 0 when every target holds (and wrk saw no errors), 1 otherwise, 2 on a set-up error.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import importlib.metadata
import json
import os
import platform
import re
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Final, Protocol, TextIO

from app.certificates.certdir import ensure_cert_dir
from bench.state import StateCounts, write_state

ROOT: Final = Path(__file__).resolve().parents[1]
POST_LUA: Final = Path(__file__).resolve().with_name("post.lua")
# served-pod: a wired Pod as kube-apiserver sends it, what the Pod door answers almost every time.
REVIEWS: Final = ("drifted-runtime", "good-runtime", "served-pod")
EXPECTED_ALLOWED: Final = {"drifted-runtime": False, "good-runtime": True, "served-pod": True}
# The Go echo, one connection: nicguard's p50 at most this many times its.
MAX_P50_VS_GO: Final = 2.5
# The FastAPI echo on uvicorn's defaults, at concurrency: nicguard's throughput at least this many
# times its, its p99 at most this many times its.
MIN_THROUGHPUT_VS_DEFAULT: Final = 1.5
MAX_P99_VS_DEFAULT: Final = 1.0
# The FastAPI echo on nicguard's stack, at concurrency (SPEC §10); an allow, what the doors answer
# almost every time, is held to more: at least 0.85 of its throughput, its p99 within 1.25.
MIN_THROUGHPUT_RATIO: Final = 0.80
MAX_P99_RATIO: Final = 1.5
MIN_ALLOW_THROUGHPUT_RATIO: Final = 0.85
MAX_ALLOW_P99_RATIO: Final = 1.25
GO: Final = "go-echo"
DEFAULT_ECHO: Final = "echo-default"
ECHO: Final = "echo"
NICGUARD: Final = "nicguard"
SINGLE: Final = (GO, NICGUARD)
CONCURRENT: Final = (DEFAULT_ECHO, ECHO, NICGUARD)
MAX_RSS_MB: Final = 120.0
_HOST: Final = "127.0.0.1"
_UNITS: Final = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
_LATENCY: Final = re.compile(r"^\s*(50|99)%\s+([0-9.]+)(us|ms|s|m|h)\s*$", re.MULTILINE)
_RPS: Final = re.compile(r"^Requests/sec:\s+([0-9.]+)\s*$", re.MULTILINE)
_REQUESTS: Final = re.compile(r"^\s*(\d+) requests in ([0-9.]+)(us|ms|s|m|h),", re.MULTILINE)
_NON_2XX: Final = re.compile(r"Non-2xx or 3xx responses:\s+(\d+)")
_SOCKET_ERRORS: Final = re.compile(
    r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)"
)


class BenchError(Exception):
    """The benchmark could not run (a server did not start, wrk is missing, ...)."""


@dataclass(frozen=True, slots=True)
class WrkResult:
    """One wrk run: throughput, latency percentiles in milliseconds, and errors seen."""

    requests_per_second: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int
    server_cpu_us: float = 0.0
    """CPU time (user + system) the server process spent per request during the run."""


def parse_wrk(output: str) -> WrkResult:
    """Read Requests/sec, the 50 %/99 % latencies and error counts from ``wrk --latency``."""
    rps = _RPS.search(output)
    requests = _REQUESTS.search(output)
    latencies = {m[1]: float(m[2]) * _UNITS[m[3]] for m in _LATENCY.finditer(output)}
    if rps is None or requests is None or set(latencies) != {"50", "99"}:
        raise BenchError(f"cannot parse wrk output:\n{output}")
    errors = sum(int(n) for m in _SOCKET_ERRORS.finditer(output) for n in m.groups())
    errors += sum(int(m[1]) for m in _NON_2XX.finditer(output))
    return WrkResult(
        requests_per_second=float(rps[1]),
        p50_ms=latencies["50"],
        p99_ms=latencies["99"],
        requests=int(requests[1]),
        errors=errors,
    )


@dataclass(frozen=True, slots=True)
class Load:
    """How wrk drives a server."""

    threads: int
    connections: int
    seconds: int


@dataclass(slots=True)
class Server:
    """A server under test, running as a child process."""

    name: str
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def check_running(self) -> None:
        if self.process.poll() is not None:
            tail = self.log.read_text(errors="replace")[-2000:]
            raise BenchError(f"{self.name} exited with {self.process.returncode}:\n{tail}")


def rss_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, in KiB, from /proc/<pid>/status."""
    values: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0])
    return values


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rpartition(")")[2].split()  # after "pid (comm)": state is fields[0]
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _child_env() -> dict[str, str]:
    """The environment without NICGUARD_* settings that would change what is measured."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NICGUARD_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


@contextlib.contextmanager
def running(name: str, argv: Sequence[str], url: str, log: Path) -> Iterator[Server]:
    """Start a server (stdout and stderr to ``log``); stop it on exit (SIGTERM, then kill)."""
    with log.open("wb") as out:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and entry points
            list(argv), cwd=ROOT, env=_child_env(), stdout=out, stderr=subprocess.STDOUT
        )
    try:
        yield Server(name=name, process=process, url=url, log=log)
    finally:
        stop(process)


def stop(process: subprocess.Popen[bytes], timeout: float = 20) -> None:
    """SIGTERM, then SIGKILL if ``process`` has not exited within ``timeout`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)


def start_nicguard(
    work: Path, state: Path, cert: Path, key: Path, log_name: str, probe_port: int | None = None
) -> contextlib.AbstractContextManager[Server]:
    port, probe_port = free_port(), probe_port or free_port()
    argv = [
        str(Path(sys.executable).with_name("nicguard")),
        "serve",
        f"--state={state}",
        f"--host={_HOST}",
        f"--port={port}",
        f"--probe-port={probe_port}",
        f"--tls-cert={cert}",
        f"--tls-key={key}",
    ]
    return running("nicguard", argv, f"https://{_HOST}:{port}/validate", work / log_name)


def start_echo(
    work: Path, cert: Path, key: Path, stack: str = "nicguard"
) -> contextlib.AbstractContextManager[Server]:
    port, name = free_port(), ECHO if stack == "nicguard" else DEFAULT_ECHO
    argv = [
        sys.executable,
        "-m",
        "bench.echo_app",
        f"--host={_HOST}",
        f"--port={port}",
        f"--tls-cert={cert}",
        f"--tls-key={key}",
        f"--stack={stack}",
    ]
    return running(name, argv, f"https://{_HOST}:{port}/validate", work / f"{name}.log")


def start_go_echo(work: Path, cert: Path, key: Path) -> contextlib.AbstractContextManager[Server]:
    go = shutil.which("go")
    if go is None:
        raise BenchError("go is not installed: bench/goecho cannot be built")
    binary = work / "goecho"
    built = subprocess.run(  # noqa: S603 - the Go toolchain on our own source
        [go, "build", "-o", str(binary), "."],
        cwd=ROOT / "bench" / "goecho",
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        raise BenchError(f"go build bench/goecho failed: {built.stderr[-2000:]}")
    port = free_port()
    argv = [str(binary), f"{_HOST}:{port}", str(cert), str(key)]
    return running(GO, argv, f"https://{_HOST}:{port}/validate", work / "goecho.log")


def post_review(url: str, body: bytes, ca: Path) -> dict[str, object]:
    """POST a review over verified TLS; the decoded AdmissionReview ``response``."""
    host_port = url.removeprefix("https://").split("/", 1)[0]
    host, _, port = host_port.partition(":")
    connection = http.client.HTTPSConnection(
        host, int(port), context=ssl.create_default_context(cafile=str(ca)), timeout=5
    )
    try:
        connection.request(
            "POST", "/validate", body=body, headers={"Content-Type": "application/json"}
        )
        reply = connection.getresponse()
        payload = reply.read()
    finally:
        connection.close()
    if reply.status != 200:
        raise BenchError(f"{url}: HTTP {reply.status}: {payload[:200]!r}")
    decoded = json.loads(payload)
    response = decoded.get("response") if isinstance(decoded, dict) else None
    if not isinstance(response, dict):
        raise BenchError(f"{url}: not an AdmissionReview response: {payload[:200]!r}")
    return response


def wait_answering(server: Server, body: bytes, ca: Path, timeout: float) -> dict[str, object]:
    """Wait until the server answers a review (it may still be loading its state)."""
    deadline = time.monotonic() + timeout
    while True:
        server.check_running()
        try:
            return post_review(server.url, body, ca)
        except (OSError, http.client.HTTPException):
            if time.monotonic() > deadline:
                raise BenchError(f"{server.name} not answering after {timeout:.0f}s") from None
            time.sleep(0.25)


def check_answer(server: Server, review: str, body: bytes, ca: Path) -> None:
    """The echo allows everything; nicguard must give the review's expected decision."""
    response = post_review(server.url, body, ca)
    expected = EXPECTED_ALLOWED[review] if server.name == NICGUARD else True
    uid = json.loads(body)["request"]["uid"]
    if response.get("allowed") is not expected or response.get("uid") != uid:
        raise BenchError(f"{server.name} answered {review} unexpectedly: {response}")


class WrkTarget(Protocol):
    """A running server wrk can drive (``Server`` here; nicguard on a control plane too)."""

    @property
    def url(self) -> str: ...

    @property
    def pid(self) -> int: ...

    def check_running(self) -> None: ...


def run_wrk(server: WrkTarget, review_file: Path, load: Load) -> WrkResult:
    argv = [
        "wrk",
        f"-t{load.threads}",
        f"-c{load.connections}",
        f"-d{load.seconds}s",
        "--latency",
        "-s",
        str(POST_LUA),
        server.url,
    ]
    env = {**os.environ, "NICGUARD_BENCH_BODY": str(review_file)}
    cpu_before = cpu_seconds(server.pid)
    done = subprocess.run(  # noqa: S603 - fixed argv, wrk found on PATH by design
        argv, env=env, capture_output=True, text=True, timeout=load.seconds + 60, check=False
    )
    if done.returncode != 0:
        raise BenchError(f"wrk failed ({done.returncode}): {done.stderr.strip()}")
    server.check_running()
    result = parse_wrk(done.stdout)
    cpu = cpu_seconds(server.pid) - cpu_before
    return replace(result, server_cpu_us=cpu * 1e6 / max(result.requests, 1))


@dataclass(slots=True)
class Comparison:
    """Every round of one review under one load, against each of its servers."""

    review: str
    load: Load
    servers: tuple[str, ...]
    rounds: dict[str, list[WrkResult]] = field(default_factory=dict)

    def median(self, server: str, metric: str) -> float:
        return statistics.median(float(getattr(r, metric)) for r in self.rounds[server])

    def ratio(self, metric: str, baseline: str) -> float:
        return self.median(NICGUARD, metric) / self.median(baseline, metric)

    def errors(self) -> int:
        return sum(r.errors for results in self.rounds.values() for r in results)


def load_average() -> str:
    """1/5/15-minute load averages: other work on the machine skews every number."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def machine() -> dict[str, str]:
    """What the numbers were measured on."""
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
    meminfo = Path("/proc/meminfo").read_text()
    memory = re.search(r"^MemTotal:\s*(\d+) kB", meminfo, re.MULTILINE)
    wrk = subprocess.run(
        ["wrk", "-v"],  # noqa: S607 - wrk from PATH, as `make bench` installs it
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )

    def version(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    return {
        "nproc": str(os.cpu_count()),
        "cpu": model[1].strip() if model else platform.processor(),
        "memory": f"{int(memory[1]) / 1024 / 1024:.1f} GiB" if memory else "?",
        "kernel": platform.release(),
        "loadavg": load_average(),
        "python": platform.python_version(),
        "uvicorn": version("uvicorn"),
        "fastapi": version("fastapi"),
        "httptools": version("httptools"),
        "uvloop": version("uvloop"),
        "wrk": (wrk.stdout + wrk.stderr).splitlines()[0] if wrk.stdout + wrk.stderr else "?",
    }


def _say(out: TextIO, text: str = "") -> None:
    out.write(text + "\n")
    out.flush()


def _verdict(ok: bool) -> str:  # noqa: FBT001 - a plain predicate
    return "PASS" if ok else "FAIL"


def throughput(
    work: Path, cert: Path, ca: Path, key: Path, args: argparse.Namespace, out: TextIO
) -> tuple[list[Comparison], dict[str, dict[str, int]]]:
    single = Load(threads=1, connections=1, seconds=args.duration)
    concurrent = Load(threads=args.threads, connections=args.connections, seconds=args.duration)
    warm = Load(threads=args.threads, connections=args.connections, seconds=args.warmup)
    comparisons = [
        Comparison(review, load, names)
        for load, names in ((single, SINGLE), (concurrent, CONCURRENT))
        for review in args.reviews
    ]
    state = ROOT / "examples" / "cluster"
    with (
        start_nicguard(work, state, cert, key, "nicguard.log") as nicguard,
        start_echo(work, cert, key) as echo,
        start_echo(work, cert, key, stack="uvicorn-default") as echo_default,
        start_go_echo(work, cert, key) as go_echo,
    ):
        servers = {s.name: s for s in (go_echo, echo_default, echo, nicguard)}
        for review in args.reviews:
            review_file = ROOT / "examples" / "reviews" / f"{review}.json"
            body = review_file.read_bytes()
            for server in servers.values():
                wait_answering(server, body, ca, timeout=60)
                check_answer(server, review, body, ca)
                run_wrk(server, review_file, warm)
        _say(out, f"warmed up; {args.rounds} rounds of {args.duration}s per review and server")
        # Each round takes every comparison in turn, so that a machine slower for a minute
        # weighs on every review and load alike, not on whichever was measured then.
        for number in range(args.rounds):
            for comparison in comparisons:
                review_file = ROOT / "examples" / "reviews" / f"{comparison.review}.json"
                names = comparison.servers
                shift = number % len(names)  # each server first in turn
                for name in names[shift:] + names[:shift]:
                    result = run_wrk(servers[name], review_file, comparison.load)
                    comparison.rounds.setdefault(name, []).append(result)
                    _say(
                        out,
                        f"  {comparison.review:<16} -c{comparison.load.connections:<3} "
                        f"round {number + 1} {name:<12} "
                        f"{result.requests_per_second:8.1f} req/s  p50 {result.p50_ms:6.3f} ms  "
                        f"p99 {result.p99_ms:6.3f} ms  "
                        f"server CPU {result.server_cpu_us:4.0f} us/req  errors {result.errors}",
                    )
        rss = {name: rss_kib(server.pid) for name, server in servers.items()}
    return comparisons, rss


@dataclass(frozen=True, slots=True)
class MemoryResult:
    """nicguard's RSS (KiB) on the 10,000-object state: once ready, and after a load round."""

    networks: int
    runtimes: int
    ready_seconds: float
    ready_kib: dict[str, int]
    after_load_kib: dict[str, int]
    load_round: WrkResult

    @property
    def worst_mib(self) -> float:
        return max(self.ready_kib["VmRSS"], self.after_load_kib["VmRSS"]) / 1024


def memory(work: Path, cert: Path, ca: Path, key: Path, args: argparse.Namespace) -> MemoryResult:
    state = work / "state-10k"
    counts = write_state(state)
    review_file = ROOT / "examples" / "reviews" / "drifted-runtime.json"
    body = review_file.read_bytes()
    load = Load(threads=args.threads, connections=args.connections, seconds=args.duration)
    started = time.monotonic()
    with start_nicguard(work, state, cert, key, "nicguard-10k.log") as nicguard:
        wait_answering(nicguard, body, ca, timeout=args.load_timeout)
        ready_seconds = time.monotonic() - started
        check_answer(nicguard, "drifted-runtime", body, ca)
        ready = rss_kib(nicguard.pid)
        loaded = run_wrk(nicguard, review_file, load)
        after = rss_kib(nicguard.pid)
    return MemoryResult(
        networks=counts.networks,
        runtimes=counts.runtimes,
        ready_seconds=round(ready_seconds, 1),
        ready_kib=ready,
        after_load_kib=after,
        load_round=loaded,
    )


@dataclass(frozen=True, slots=True)
class Target:
    """One ratio of nicguard's median to a baseline's, and its bound."""

    metric: str
    baseline: str
    bound: float
    at_least: bool

    def holds(self, ratio: float) -> bool:
        return ratio >= self.bound if self.at_least else ratio <= self.bound

    def described(self) -> str:
        what = {"requests_per_second": "throughput", "p50_ms": "p50", "p99_ms": "p99"}
        return f"{what[self.metric]} {'>=' if self.at_least else '<='} {self.bound:.2f}x"


TARGETS: Final = {
    SINGLE: (Target("p50_ms", GO, MAX_P50_VS_GO, at_least=False),),
    CONCURRENT: (
        Target("requests_per_second", DEFAULT_ECHO, MIN_THROUGHPUT_VS_DEFAULT, at_least=True),
        Target("p99_ms", DEFAULT_ECHO, MAX_P99_VS_DEFAULT, at_least=False),
        Target("requests_per_second", ECHO, MIN_THROUGHPUT_RATIO, at_least=True),
        Target("p99_ms", ECHO, MAX_P99_RATIO, at_least=False),
    ),
}
_ALLOW_TARGETS: Final = {
    Target("requests_per_second", ECHO, MIN_THROUGHPUT_RATIO, at_least=True): Target(
        "requests_per_second", ECHO, MIN_ALLOW_THROUGHPUT_RATIO, at_least=True
    ),
    Target("p99_ms", ECHO, MAX_P99_RATIO, at_least=False): Target(
        "p99_ms", ECHO, MAX_ALLOW_P99_RATIO, at_least=False
    ),
}


def targets(comparison: Comparison) -> tuple[Target, ...]:
    """The bars of one comparison: an allow's against the same-stack echo are the stricter."""
    bars = TARGETS[comparison.servers]
    if not EXPECTED_ALLOWED[comparison.review]:
        return bars
    return tuple(_ALLOW_TARGETS.get(bar, bar) for bar in bars)


def report(
    comparisons: list[Comparison],
    rss: dict[str, dict[str, int]],
    mem: MemoryResult | None,
    out: TextIO,
) -> bool:
    ok = True
    if comparisons:
        _say(out)
        _say(out, "medians of the rounds:")
        _say(out, "review            conns  server          req/s    p50 ms    p99 ms  CPU us/req")
        for c in comparisons:
            for name in c.servers:
                _say(
                    out,
                    f"{c.review:<17} {c.load.connections:5}  {name:<12} "
                    f"{c.median(name, 'requests_per_second'):9.1f} "
                    f"{c.median(name, 'p50_ms'):9.3f} {c.median(name, 'p99_ms'):9.3f} "
                    f"{c.median(name, 'server_cpu_us'):11.0f}",
                )
        _say(out)
        _say(out, "nicguard / baseline (same run):")
        for c in comparisons:
            for target in targets(c):
                ratio = c.ratio(target.metric, target.baseline)
                held = target.holds(ratio)
                ok = ok and held
                _say(
                    out,
                    f"{c.review:<17} -c{c.load.connections:<3} vs {target.baseline:<12} "
                    f"{target.described():<20} {ratio:6.2f} {_verdict(held)}",
                )
            for baseline in c.servers[:-1]:
                _say(
                    out,
                    f"{c.review:<17} -c{c.load.connections:<3} vs {baseline:<12} "
                    f"{'server CPU per request':<20} "
                    f"{c.ratio('server_cpu_us', baseline):6.2f}",
                )
            if errors := c.errors():
                ok = False
                _say(out, f"{c.review:<17} -c{c.load.connections:<3} FAIL: {errors} wrk errors")
        _say(
            out,
            "RSS after the rounds (example state): "
            + ", ".join(f"{n} {v['VmRSS'] / 1024:.1f} MiB" for n, v in rss.items()),
        )
    if mem is not None:
        rss_ok = mem.worst_mib * 2**20 <= MAX_RSS_MB * 1e6  # MB as the target says: 10^6 bytes
        ok = ok and rss_ok and not mem.load_round.errors
        _say(out)
        _say(
            out,
            f"RSS with {StateCounts(mem.networks, mem.runtimes).described()} "
            f"(answering {mem.ready_seconds}s after start):",
        )
        _say(
            out, f"  ready:                          VmRSS {mem.ready_kib['VmRSS'] / 1024:6.1f} MiB"
        )
        _say(
            out,
            f"  after a {mem.load_round.requests:,}-request wrk round: "
            f"VmRSS {mem.after_load_kib['VmRSS'] / 1024:6.1f} MiB "
            f"(VmHWM, the peak while loading the files: "
            f"{mem.after_load_kib['VmHWM'] / 1024:.1f} MiB)",
        )
        worst_mb = mem.worst_mib * 2**20 / 1e6
        _say(
            out,
            f"  RSS {mem.worst_mib:.1f} MiB = {worst_mb:.1f} MB (<= {MAX_RSS_MB:.0f} MB) "
            f"{_verdict(rss_ok)}",
        )
    return ok


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per review and server")
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk round")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of warm-up per server")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--connections", type=int, default=16, help="wrk keep-alive connections")
    parser.add_argument("--reviews", nargs="+", choices=REVIEWS, default=list(REVIEWS))
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument(
        "--load-timeout", type=float, default=600, help="seconds to wait for the 10k state"
    )
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args(argv)
    for name in ("rounds", "duration", "warmup", "threads", "connections"):
        if not 1 <= getattr(args, name) <= 600:
            parser.error(f"--{name} must be between 1 and 600")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out = sys.stdout
    if shutil.which("wrk") is None:
        _say(sys.stderr, "bench: wrk not found on PATH (apt-get install wrk)")
        return 2
    info = machine()
    _say(out, "machine: " + ", ".join(f"{k} {v}" for k, v in info.items()))
    _say(
        out,
        f"load: wrk -t{args.threads} -c{args.connections} -d{args.duration}s --latency "
        f"-s bench/post.lua (keep-alive, client on the same machine, nothing pinned)",
    )
    try:
        with tempfile.TemporaryDirectory(prefix="nicguard-bench-") as tmp:
            work = Path(tmp)
            certs = ensure_cert_dir(work / "certs", ("localhost", _HOST))
            comparisons: list[Comparison] = []
            rss: dict[str, dict[str, int]] = {}
            if not args.skip_throughput:
                comparisons, rss = throughput(work, certs.cert, certs.ca, certs.key, args, out)
            mem = None if args.skip_rss else memory(work, certs.cert, certs.ca, certs.key, args)
    except BenchError as error:
        _say(sys.stderr, f"bench: {error}")
        return 2
    ok = report(comparisons, rss, mem, out)
    if args.json is not None:
        raw = {
            "machine": info,
            "args": {k: str(v) for k, v in vars(args).items()},
            "throughput": [
                {
                    "review": c.review,
                    "load": asdict(c.load),
                    "rounds": {n: [asdict(r) for r in rs] for n, rs in c.rounds.items()},
                }
                for c in comparisons
            ],
            "rss_example_state_kib": rss,
            "rss_10k": None if mem is None else asdict(mem),
        }
        args.json.write_text(json.dumps(raw, indent=2) + "\n")
    _say(out, f"\nload average at the end: {load_average()}")
    _say(out, f"bench: {_verdict(ok)}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
