"""The Dockerfile replayed without Docker on Python 3.13, then the image run as its USER, traced.

tests/test_image_replay.py runs it (``make image-replay``, ``make slow``) and says what must hold.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import resource
import shlex
import shutil
import signal
import ssl
import subprocess
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any, Final

from tests.harness.procs import free_ports, http_status, wait_until

ROOT: Final = Path(__file__).resolve().parents[1]
# The forms of each instruction the replay performs; any other fails it before the build starts.
FORMS: Final = {
    keyword: re.compile(form, re.IGNORECASE)
    for keyword, form in {
        "FROM": r"python:3\.13(-[\w.-]+)?(\s+AS\s+\w+)?",  # the base the replay stands in for
        "WORKDIR": r"/\S*",
        "ENV": r"(\w+=\S+\s*)+",
        "COPY": r"(--from=\w+\s+)?[^-\s]\S*(\s+\S+)+",
        "RUN": r"[^\[\s-].*",  # the shell form, no flags
        "USER": r"\d+:\d+",
        "ENTRYPOINT": r"\[.*\]",
        "CMD": r"\[.*\]",
        "LABEL": r".*",  # metadata: nothing in the tree or in a run
        "EXPOSE": r".*",
    }.items()
}
# python:3.13-slim's environment (docker-library/python), as docker build gives it to RUN.
BASE_ENV: Final = {
    "PATH": "/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
}
CACHE_TAG: Final = "cpython-313"
# The base's Debian: the host's own directories stand in for it. Every other absolute path of the
# image lives in the replay's root.
HOST_DIRS: Final = ("/bin", "/sbin", "/usr/bin", "/usr/sbin", "/lib", "/lib64", "/usr/lib", "/dev")
ABSOLUTE: Final = re.compile(r"(?<![\w.$/:-])/[\w.+/-]*")
# The system calls that can change the file system through a path (strace -e trace=...); of the
# opens, only those asking to write count.
WRITE_CALLS: Final = (
    "open,openat,openat2,creat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,rmdir,"
    "link,linkat,symlink,symlinkat,truncate,mknod,mknodat,chmod,fchmodat,chown,lchown,fchownat,"
    "utime,utimes,utimensat,setxattr,lsetxattr,removexattr,lremovexattr"
)
OPEN_READ_ONLY: Final = re.compile(r"^open(at2?)?\((?!.*\bO_(WRONLY|RDWR|CREAT|TRUNC|APPEND)\b)")
QUOTED: Final = re.compile(r'"((?:[^"\\]|\\.)*)"')
ROUNDS: Final = 3
TIMEOUT: Final = 120.0
MAX_CHECK_CPU_SECONDS: Final = 0.5  # nicguard check of one object, per start (SPEC §10)


class ReplayError(Exception):
    """The Dockerfile holds what the replay cannot perform, or a step of the build failed."""


def say(line: str) -> None:
    print(line, flush=True)  # noqa: T201 - the transcript of `make image-replay`


@dataclass(frozen=True, slots=True)
class Instruction:
    line: int
    keyword: str
    args: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.keyword} {self.args}"


def instructions(dockerfile: Path) -> list[Instruction]:
    """The Dockerfile's instructions (continuations joined, comments dropped), each in a form the
    replay performs."""
    found: list[Instruction] = []
    pending, start = "", 0
    for number, raw in enumerate(dockerfile.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        start = start if pending else number
        part = line.removesuffix("\\").strip()
        pending = f"{pending} {part}".strip()
        if not line.endswith("\\"):
            keyword, _, args = pending.partition(" ")
            found.append(Instruction(start, keyword.upper(), args.strip()))
            pending = ""
    for ins in found:
        form = FORMS.get(ins.keyword)
        if form is None or form.fullmatch(ins.args) is None:
            raise ReplayError(f"Dockerfile {ins}: not a form the replay performs; teach it")
    return found


@dataclass(slots=True)
class Build:
    """The stage being built: its root ``<work>/rootfs``, at one path for every stage as Docker
    builds each at ``/`` (a venv copied between stages names its interpreter by that path)."""

    work: Path
    python_prefix: Path
    names: list[str] = field(default_factory=list)
    workdir: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    user: str = "0:0"
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)  # each RUN as the Dockerfile writes it

    @property
    def rootfs(self) -> Path:
        return self.work / "rootfs"

    def host(self, image_path: str) -> str:
        path = os.path.normpath(os.path.join(self.workdir, image_path))
        if any(path == d or path.startswith(f"{d}/") for d in HOST_DIRS):
            return path
        return str(self.rootfs) + path.rstrip("/")

    def host_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """Absolute paths, also in PATH-like lists, moved into the root; libpython found in it
        (a local CPython's RUNPATH names its own prefix, which uid 65532 may not read)."""
        mapped = {
            key: ":".join(self.host(p) if p.startswith("/") else p for p in value.split(":"))
            for key, value in env.items()
        }
        return {**mapped, "LD_LIBRARY_PATH": self.host("/usr/local/lib")}


def step_from(build: Build, ins: Instruction) -> None:
    """A fresh root whose /usr/local is python:3.13-slim's as the image uses it: the interpreter,
    libpython, the standard library without bytecode or tests (site-packages, the base's pip's
    place, left empty)."""
    if build.rootfs.exists():
        (build.work / "stages").mkdir(exist_ok=True)
        build.rootfs.rename(build.work / "stages" / build.names[-1])
    words = ins.args.split()  # python:3.13-slim [AS name]
    build.names.append(words[2] if len(words) == 3 else str(len(build.names)))
    build.workdir, build.env, build.user = "/", dict(BASE_ENV), "0:0"
    lib = build.rootfs / "usr" / "local" / "lib"
    shutil.copytree(
        build.python_prefix / "lib" / "python3.13",
        lib / "python3.13",
        symlinks=True,
        ignore=shutil.ignore_patterns(
            "test", "tests", "idle_test", "__pycache__", "site-packages", "libpython*.a"
        ),
    )
    (lib / "python3.13" / "site-packages").mkdir()
    for so in build.python_prefix.glob("lib/libpython3*.so*"):
        shutil.copy2(so, lib, follow_symlinks=False)
    bin_dir = build.rootfs / "usr" / "local" / "bin"
    bin_dir.mkdir()
    shutil.copy2(build.python_prefix / "bin" / "python3.13", bin_dir)
    (bin_dir / "python3").symlink_to("python3.13")
    (bin_dir / "python").symlink_to("python3")


def step_workdir(build: Build, ins: Instruction) -> None:
    build.workdir = os.path.join(build.workdir, ins.args)
    Path(build.host(build.workdir)).mkdir(parents=True, exist_ok=True)


def step_env(build: Build, ins: Instruction) -> None:
    for word in shlex.split(ins.args):
        key, _, value = word.partition("=")
        build.env[key] = re.sub(r"\$\{?(\w+)\}?", lambda m: build.env.get(m[1], ""), value)


def step_copy(build: Build, ins: Instruction) -> None:
    """From the context, less .dockerignore, or with ``--from`` from an earlier stage's root."""
    *sources, dest = shlex.split(ins.args)
    origin, (top, ignore) = ROOT, dockerignore(ROOT)
    if sources[0].startswith("--from="):
        stage = sources.pop(0).removeprefix("--from=")
        origin, top, ignore = build.work / "stages" / stage, [], None
    target = Path(build.host(dest))
    for source in sources:
        if any(fnmatch.fnmatchcase(source.strip("/"), pattern) for pattern in top):
            raise ReplayError(f"Dockerfile {ins}: {source} is in .dockerignore")
        path = origin / source.lstrip("/")
        if path.is_dir():
            shutil.copytree(path, target, symlinks=True, ignore=ignore, dirs_exist_ok=True)
        else:
            into_dir = dest.endswith("/") or len(sources) > 1
            (target if into_dir else target.parent).mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / path.name if into_dir else target)


def dockerignore(context: Path) -> tuple[list[str], Callable[[str, list[str]], set[str]] | None]:
    """.dockerignore's patterns of the context's top level, and its ``**/name`` ones as
    copytree's filter."""
    lines = (context / ".dockerignore").read_text(encoding="utf-8").splitlines()
    patterns = [p.strip().strip("/") for p in lines if p.strip() and not p.startswith("#")]
    if any(p.startswith("!") or "/" in p.removeprefix("**/") for p in patterns):
        raise ReplayError(".dockerignore: exceptions and nested paths are not replayed; teach it")
    anywhere = [p.removeprefix("**/") for p in patterns if p.startswith("**/")]
    return [p for p in patterns if not p.startswith("**/")], shutil.ignore_patterns(*anywhere)


def step_run(build: Build, ins: Instruction) -> None:
    """Verbatim under /bin/sh -c, the image's paths moved into the root."""
    command = ABSOLUTE.sub(lambda m: build.host(m[0]), ins.args)
    env = build.host_env(build.env)
    if env.pop("PIP_NO_CACHE_DIR", None) is not None:
        # A liberty: the host's download cache, so that each replay does not download the lock
        # again (every file is still checked against requirements.lock's hashes).
        env["PIP_CACHE_DIR"] = str(Path.home() / ".cache" / "pip")
    say(f"  $ {command}")
    done = subprocess.run(  # noqa: S603 - the Dockerfile's own command, as docker build runs it
        ["/bin/sh", "-c", command], cwd=build.host(build.workdir), env=env, check=False
    )
    if done.returncode != 0:
        raise ReplayError(f"Dockerfile {ins}: exited {done.returncode}")
    build.runs.append(ins.args)


def step_record(build: Build, ins: Instruction) -> None:
    """USER, ENTRYPOINT and CMD: kept for the run."""
    value = json.loads(ins.args) if ins.args.startswith("[") else ins.args
    setattr(build, ins.keyword.lower(), value)


STEPS: Final[dict[str, Callable[[Build, Instruction], None]]] = {
    "FROM": step_from,
    "WORKDIR": step_workdir,
    "ENV": step_env,
    "COPY": step_copy,
    "RUN": step_run,
    "USER": step_record,
    "ENTRYPOINT": step_record,
    "CMD": step_record,
}


@dataclass(frozen=True, slots=True)
class Ran:
    status: int
    stdout: str
    stderr: str
    cpu_seconds: float  # user + system, of the process (setpriv execs nicguard in its place)


@dataclass(slots=True)
class Report:
    runs: list[str]  # the Dockerfile's RUN commands, as performed
    modules: int  # .py files in the image
    without_bytecode: list[str]  # those without a .pyc for the image's interpreter
    version: Ran | None = None
    checks: list[tuple[Ran, Ran]] = field(default_factory=list)  # the image's, the .venv's
    ids: str = ""  # Uid, Gid and Groups of the serving process
    review: dict[str, Any] = field(default_factory=dict)  # its AdmissionReview response
    readyz: int | None = None
    serve_status: int | None = None  # after SIGTERM
    serve_log: str = ""
    untraced: list[Ran] = field(default_factory=list)  # `check`, for the CPU it costs
    cert_writes: list[str] = field(default_factory=list)  # strace lines, in the cert dir
    writes: list[str] = field(default_factory=list)  # every other write, done or attempted
    control: list[str] = field(default_factory=list)  # writes of a run missing one .pyc

    @property
    def check_cpu_seconds(self) -> float:
        return median(r.cpu_seconds for r in self.untraced)


@dataclass(frozen=True, slots=True)
class Image:
    """The final stage run as its USER (setpriv, no groups), HOME=/ as Docker sets it for a uid
    without a passwd entry. Traced runs drop PYTHONDONTWRITEBYTECODE: a module compiled at run
    time then tries to write its bytecode, which strace sees."""

    build: Build
    traces: Path

    def argv(self, args: Sequence[str], trace: str | None) -> list[str]:
        uid, gid = self.build.user.split(":")
        run = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
        command = [*run, *self.build.entrypoint, *args]
        if trace is None:
            return command
        (self.traces / trace).mkdir(parents=True)
        out = str(self.traces / trace / "pid")
        return ["strace", "-ff", "-qq", "-e", f"trace={WRITE_CALLS}", "-o", out, *command]

    @property
    def cwd(self) -> str:
        return self.build.host(self.build.workdir)

    def env(self, *, traced: bool) -> dict[str, str]:
        env = self.build.host_env({**self.build.env, "HOME": "/"})
        return {k: v for k, v in env.items() if not traced or k != "PYTHONDONTWRITEBYTECODE"}

    def run(self, args: Sequence[str], trace: str | None = None) -> Ran:
        env = self.env(traced=trace is not None)
        return execute(self.argv(args, trace), cwd=self.cwd, env=env)


def execute(argv: Sequence[str], *, cwd: Path | str, env: Mapping[str, str] | None = None) -> Ran:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(  # noqa: S603 - our own argv
        argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=TIMEOUT, check=False
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return Ran(done.returncode, done.stdout, done.stderr, cpu)


def serve(image: Image, state: Path, cert_dir: Path, report: Report) -> None:
    """``nicguard serve`` in file mode: ready, one review over TLS, /readyz, SIGTERM."""
    port, probe_port = free_ports(2)
    args = [*image.build.cmd, "--state", str(state), "--host", "127.0.0.1"]
    args += ["--port", str(port), "--probe-port", str(probe_port)]
    log = image.traces / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(  # noqa: S603 - our own argv
            image.argv(args, trace="serve"),
            stdout=sink,
            stderr=sink,
            cwd=image.cwd,
            env=image.env(traced=True),
        )
    try:
        readyz = f"http://127.0.0.1:{probe_port}/readyz"
        wait_until(
            lambda: http_status(readyz) == 200 or None,
            timeout=TIMEOUT,
            what="nicguard serve (the image) to be ready",
            diagnose=lambda: log.read_text(encoding="utf-8", errors="replace")[-4000:],
        )
        # strace's one child: setpriv, which has become nicguard by exec.
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
        (pid,) = children.read_text(encoding="ascii").split()
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines()
        report.ids = "\n".join(
            s.rstrip() for s in status if s.startswith(("Uid:", "Gid:", "Groups:"))
        )
        body = (ROOT / "examples" / "reviews" / "drifted-runtime.json").read_bytes()
        request = urllib.request.Request(
            f"https://127.0.0.1:{port}/validate", data=body, method="POST"
        )
        request.add_header("Content-Type", "application/json")
        tls = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
        with urllib.request.urlopen(request, timeout=10, context=tls) as reply:  # noqa: S310
            report.review = json.loads(reply.read())["response"]
        report.readyz = http_status(readyz)
        os.kill(int(pid), signal.SIGTERM)
        report.serve_status = process.wait(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()  # and nicguard with it: strace started it, and kills it as it dies
            process.wait(timeout=TIMEOUT)
        report.serve_log = log.read_text(encoding="utf-8", errors="replace")


def writes(traces: Path, cert_dir: Path) -> tuple[list[str], list[str]]:
    """Each write-like call in ``traces`` (strace -ff logs), done or refused: those on paths all in
    ``cert_dir``, then every other one (a relative path or a descriptor counts as outside)."""
    inside: list[str] = []
    outside: list[str] = []
    for log in sorted(traces.glob("**/pid.*")):
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(("---", "+++")) or OPEN_READ_ONLY.match(line):
                continue  # a signal, an exit, a read
            paths = QUOTED.findall(line)
            if paths == ["/dev/null"]:
                continue  # a child process's stdin (subprocess.DEVNULL): nothing lands there
            in_cert_dir = bool(paths) and all(p.startswith(f"{cert_dir}/") for p in paths)
            (inside if in_cert_dir else outside).append(f"[{log.parent.name}] {line}")
    return inside, outside


def find_python313() -> Path:
    """The installation prefix of $PYTHON313, else of ``pyenv prefix 3.13``, checked to be 3.13."""
    python = os.environ.get("PYTHON313")
    if not python and shutil.which("pyenv"):
        pyenv = subprocess.run(
            ["pyenv", "prefix", "3.13"],  # noqa: S607 - pyenv on PATH, as the Makefile runs it
            capture_output=True,
            text=True,
            check=False,
        ).stdout.splitlines()
        python = f"{pyenv[0]}/bin/python3.13" if pyenv else None
    probe = "import sys; print(sys.base_prefix); sys.exit(sys.version_info[:2] != (3, 13))"
    try:
        done = subprocess.run(  # noqa: S603 - the interpreter the caller names
            [python or "python3.13", "-c", probe], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        raise ReplayError(
            f"no Python 3.13 ({python}): pyenv install 3.13, or PYTHON313=/path/to/python3.13"
        ) from None
    return Path(done.stdout.strip())


def replay(work: Path, dockerfile: Path = ROOT / "Dockerfile") -> Report:
    """Build the image in ``work`` (an empty directory), run it and say what it did."""
    steps = instructions(dockerfile)
    build = Build(work, find_python313())
    umask = os.umask(0o022)  # what docker build's layers get, whatever the caller's umask
    try:
        work.chmod(0o755)  # for uid 65532 to reach the image
        for ins in steps:
            say(f"[build] {ins}")
            if step := STEPS.get(ins.keyword):
                step(build, ins)
        return run_image(build)
    finally:
        os.umask(umask)


def run_image(build: Build) -> Report:
    """The built image's bytecode, its runs and what they wrote."""
    sources = list(build.rootfs.rglob("*.py"))
    missing = [
        str(p)
        for p in sources
        if not (p.parent / "__pycache__" / f"{p.stem}.{CACHE_TAG}.pyc").exists()
    ]
    report = Report(build.runs, len(sources), missing)
    say(f"[image] {len(sources)} modules, {len(missing)} without {CACHE_TAG} bytecode")

    # The state is the repository's examples, root-owned like the tree; the cert dir is the one
    # place the image can write, as a pod's volume would be.
    state = shutil.copytree(ROOT / "examples", build.work / "state")
    cert_dir = Path(build.host(build.env["NICGUARD_CERT_DIR"]))
    cert_dir.mkdir(parents=True, mode=0o700)
    os.chown(cert_dir, *(int(i) for i in build.user.split(":")))
    image = Image(build, build.work / "traces")

    report.version = image.run(["--version"], trace="version")
    say(f"[run] nicguard --version -> {report.version.status}: {report.version.stdout.strip()}")
    cluster, objects = state / "cluster", state / "objects"
    drifted = ["check", "--state", str(cluster), str(objects / "drifted-runtime.yaml")]
    for name, argv in (
        ("check-drifted", drifted),
        ("check-good", ["check", "--state", str(cluster), str(objects / "good-trainjob.yaml")]),
        ("check-all-json", ["check", "--state", str(cluster), "--output", "json", str(objects)]),
    ):
        reference = execute([str(ROOT / ".venv" / "bin" / "nicguard"), *argv], cwd=ROOT)
        report.checks.append((image.run(argv, trace=name), reference))
        say(f"[run] nicguard {' '.join(argv)} -> {report.checks[-1][0].status}")
    serve(image, cluster, cert_dir, report)
    say(f"[run] nicguard serve: /readyz {report.readyz}, SIGTERM -> exit {report.serve_status}")
    report.untraced = [image.run(drifted) for _ in range(ROUNDS)]
    say(
        f"[cpu] nicguard check: {report.check_cpu_seconds:.2f} s per start, median of {ROUNDS} "
        f"untraced (target <= {MAX_CHECK_CPU_SECONDS} s, SPEC §10)"
    )
    report.cert_writes, report.writes = writes(image.traces, cert_dir)
    say(f"[writes] {len(report.cert_writes)} in the cert dir, {len(report.writes)} outside it")
    for line in report.writes:
        say(f"  {line}")

    # The control: with one module's bytecode gone, the trace must see Python try to write it.
    stdlib = build.rootfs / "usr" / "local" / "lib" / "python3.13"
    (stdlib / "__pycache__" / f"argparse.{CACHE_TAG}.pyc").unlink(missing_ok=True)
    image.run(["--version"], trace="control")
    report.control = writes(image.traces / "control", cert_dir)[1]
    return report
