"""``make bench``: nicguard beside a bare FastAPI/uvicorn echo, driven alternately by wrk; RSS.

1. Generates a self-signed CA and serving certificate in a temporary directory.
2. Starts ``nicguard serve --state examples/cluster`` and ``bench.echo_app`` on free loopback
   ports with the same certificate, the same ``server_ssl_context`` and the same uvicorn
   settings, checks each answers the review as expected, and warms both up.
3. For each review (the drifted runtime: a denial; the good runtime: an allow), runs
   ``wrk --latency -s bench/post.lua`` against echo and nicguard alternately, several rounds,
   parses Requests/sec and the 50 %/99 % latencies, and reports the medians and the ratios.
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
REVIEWS: Final = ("drifted-runtime", "good-runtime")
EXPECTED_ALLOWED: Final = {"drifted-runtime": False, "good-runtime": True}
MIN_THROUGHPUT_RATIO: Final = 0.80
MAX_P99_RATIO: Final = 1.5
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
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


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


def start_echo(work: Path, cert: Path, key: Path) -> contextlib.AbstractContextManager[Server]:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "bench.echo_app",
        f"--host={_HOST}",
        f"--port={port}",
        f"--tls-cert={cert}",
        f"--tls-key={key}",
    ]
    return running("echo", argv, f"https://{_HOST}:{port}/validate", work / "echo.log")


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
    expected = True if server.name == "echo" else EXPECTED_ALLOWED[review]
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
    """Every round of one review against both servers."""

    review: str
    rounds: dict[str, list[WrkResult]] = field(default_factory=lambda: {"echo": [], "nicguard": []})

    def median(self, server: str, metric: str) -> float:
        return statistics.median(float(getattr(r, metric)) for r in self.rounds[server])

    def ratio(self, metric: str) -> float:
        return self.median("nicguard", metric) / self.median("echo", metric)

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
    load = Load(threads=args.threads, connections=args.connections, seconds=args.duration)
    warm = Load(threads=args.threads, connections=args.connections, seconds=args.warmup)
    comparisons = [Comparison(review) for review in args.reviews]
    state = ROOT / "examples" / "cluster"
    with (
        start_nicguard(work, state, cert, key, "nicguard.log") as nicguard,
        start_echo(work, cert, key) as echo,
    ):
        servers = {"echo": echo, "nicguard": nicguard}
        for review in args.reviews:
            review_file = ROOT / "examples" / "reviews" / f"{review}.json"
            body = review_file.read_bytes()
            for server in servers.values():
                wait_answering(server, body, ca, timeout=60)
                check_answer(server, review, body, ca)
                run_wrk(server, review_file, warm)
        _say(out, f"warmed up; {args.rounds} rounds of {load.seconds}s per review and server")
        for comparison in comparisons:
            review_file = ROOT / "examples" / "reviews" / f"{comparison.review}.json"
            for number in range(args.rounds):
                order = ("echo", "nicguard") if number % 2 == 0 else ("nicguard", "echo")
                for name in order:
                    result = run_wrk(servers[name], review_file, load)
                    comparison.rounds[name].append(result)
                    _say(
                        out,
                        f"  {comparison.review:<16} round {number + 1} {name:<8} "
                        f"{result.requests_per_second:8.1f} req/s  p50 {result.p50_ms:6.2f} ms  "
                        f"p99 {result.p99_ms:6.2f} ms  "
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
        _say(out, "review            server       req/s   p50 ms   p99 ms  server CPU us/req")
        for c in comparisons:
            for name in ("echo", "nicguard"):
                _say(
                    out,
                    f"{c.review:<17} {name:<8} {c.median(name, 'requests_per_second'):9.1f} "
                    f"{c.median(name, 'p50_ms'):8.2f} {c.median(name, 'p99_ms'):8.2f} "
                    f"{c.median(name, 'server_cpu_us'):18.0f}",
                )
        _say(out)
        _say(out, "nicguard / echo:")
        _say(out, "review            throughput          p50     p99                 server CPU")
        for c in comparisons:
            tput, p99 = c.ratio("requests_per_second"), c.ratio("p99_ms")
            tput_ok, p99_ok, clean = (
                tput >= MIN_THROUGHPUT_RATIO,
                p99 <= MAX_P99_RATIO,
                not c.errors(),
            )
            ok = ok and tput_ok and p99_ok and clean
            _say(
                out,
                f"{c.review:<17} {tput:6.2f} (>= {MIN_THROUGHPUT_RATIO:.2f}) {_verdict(tput_ok)}  "
                f"{c.ratio('p50_ms'):5.2f}  {p99:5.2f} (<= {MAX_P99_RATIO:.1f}) "
                f"{_verdict(p99_ok)}  {c.ratio('server_cpu_us'):5.2f}"
                + ("" if clean else f"  FAIL: {c.errors()} wrk errors/non-2xx"),
            )
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
