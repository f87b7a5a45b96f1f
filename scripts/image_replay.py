"""``make image-replay``: the Dockerfile replayed without Docker, on Python 3.13, as uid 65532.

Reads the Dockerfile and replays each instruction in a fresh directory (``--work``): every stage
gets a root of its own, ``<work>/rootfs``, whose ``/usr/local`` is a copy of a CPython 3.13 laid out
as the ``python:3.13-slim`` base lays it out (no ``.pyc``, no test packages, no static libpython);
``RUN`` runs under ``/bin/sh -c`` with the image's absolute paths mapped into that root; ``COPY``
honours ``.dockerignore``; ``COPY --from`` copies from the earlier stage's root. Each stage is built
at the same host path, as Docker builds each at ``/``, so a venv copied between stages still works.
The final stage's root is the image.

Then the image is run as the Dockerfile's ``USER`` (uid/gid 65532, no supplementary groups,
``setpriv``), with ``HOME=/`` (the image root, as Docker sets it for a uid without a passwd entry)
and ``PYTHONDONTWRITEBYTECODE`` removed: every module it imports, the standard library's and the
venv's, must have the bytecode the build compiled for it, so that Python never compiles one at run
time (it would try to write the result, which strace sees). Only the certificate directory is
writable. Under ``strace -ff`` it runs ``nicguard --version``, ``nicguard check`` (exit status and
output compared with the repository's ``.venv``), and ``nicguard serve`` in file mode (a review over
TLS, ``/readyz``, SIGTERM → exit 0); then ``check`` once more with the image's exact environment,
and, untraced, a few times more for the CPU it costs per start (user + system, SPEC §10's target
``MAX_CHECK_CPU_SECONDS``).
Every write outside the certificate directory fails the replay: successful ones as found by
``strace`` (opens for writing, mkdir, rename, unlink, chmod, …) and by comparing the image tree,
the state and the temporary directories before and after; failed attempts are reported.

Needs root (to drop to uid 65532), ``strace`` and ``setpriv`` (``apt-get install strace
util-linux``), and Python 3.13: ``--python``, else ``$PYTHON313``, else ``pyenv prefix 3.13``,
else ``python3.13`` on PATH. Run from the repository root as a module, ``python -m
scripts.image_replay`` (what ``make image-replay`` does).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fnmatch
import json
import os
import re
import resource
import shlex
import shutil
import signal
import ssl
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any, Final

from tests.harness.procs import free_ports, http_status, wait_until

ROOT: Final = Path(__file__).resolve().parents[1]
BASE_IMAGE: Final = re.compile(r"^python:3\.13([.-]|$)")
# The python:3.13-slim base: Debian's PATH with /usr/local/bin first (docker-library/python).
BASE_PATH: Final = "/usr/local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Absolute paths of the image that live in the replay's root; every other one is the host's
# (/bin/sh, /usr/bin, /dev/null stand in for the base image's Debian).
IMAGE_PREFIXES: Final = ("/opt", "/usr/local", "/usr/share/doc", "/var/run", "/run", "/srv", "/app")
CERT_DIR_ENV: Final = "NICGUARD_CERT_DIR"
DEFAULT_CERT_DIR: Final = "/var/run/nicguard/certs"
WRITE_CALLS: Final = (
    "open,openat,openat2,creat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,rmdir,"
    "link,linkat,symlink,symlinkat,truncate,mknod,mknodat,chmod,fchmodat,chown,lchown,fchownat,"
    "utime,utimes,utimensat,setxattr,lsetxattr,removexattr,lremovexattr"
)
OPEN_CALLS: Final = frozenset({"open", "openat", "openat2", "creat"})
WRITE_FLAG: Final = re.compile(r"\bO_(?:WRONLY|RDWR|CREAT|TRUNC|APPEND)\b")
STRACE_LINE: Final = re.compile(
    r"^(?P<call>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+|\?)(?:<[^>]*>)?(?:\s+(?P<errno>E[A-Z]+))?"
)
QUOTED: Final = re.compile(r'"((?:[^"\\]|\\.)*)"')
DIRFD: Final = re.compile(r"^\s*(?:AT_FDCWD|\d+)<(?P<dir>[^>]*)>")
ABSOLUTE: Final = re.compile(r"(?<![\w.$/-])/[A-Za-z0-9._/+-]*")
NOT_FILES: Final = frozenset({"/dev/null"})
TEMP_DIRS: Final = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))  # noqa: S108 - scanned
REVIEW: Final = "drifted-runtime"
TIMEOUT: Final = 120.0
ROUNDS: Final = 3
MAX_CHECK_CPU_SECONDS: Final = 0.5  # nicguard check of one object, per start (SPEC §10)
_PR_SET_PDEATHSIG: Final = 1


class ReplayError(Exception):
    """The replay cannot run or the image fails one of its checks; the message says which."""


def say(line: str = "") -> None:
    print(line, flush=True)  # noqa: T201 - the transcript is the product


# --- the interpreter ---------------------------------------------------------------------------


def find_python313(override: str | None = None) -> Path:
    """``override``, else $PYTHON313, else ``pyenv prefix 3.13``, else python3.13 on PATH."""
    tried: list[str] = []
    candidates: list[str] = []
    for given in (override, os.environ.get("PYTHON313")):
        if given:
            candidates.append(given)
    with contextlib.suppress(OSError):
        prefix = subprocess.run(
            ["pyenv", "prefix", "3.13"],  # noqa: S607 - pyenv as the Makefile finds it
            capture_output=True,
            text=True,
            check=False,
        ).stdout.splitlines()
        candidates += [str(Path(p) / "bin" / "python3.13") for p in prefix[:1] if p]
    if (on_path := shutil.which("python3.13")) is not None:
        candidates.append(on_path)
    for candidate in candidates:
        tried.append(candidate)
        try:
            probe = subprocess.run(  # noqa: S603 - an interpreter named by the caller or pyenv
                [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 13))"],
                capture_output=True,
                text=True,
                check=False,
            )
        except OSError:
            continue
        if probe.stdout.strip() == "True":
            return Path(candidate)
    raise ReplayError(
        "no Python 3.13 (tried: " + (", ".join(tried) or "nothing") + "): install one "
        "(pyenv install 3.13) or pass PYTHON313=/path/to/python3.13 (make image-replay "
        "PYTHON313=..., or the environment variable for the test)"
    )


def interpreter_cache_tag(python: Path) -> str:
    """The tag of the bytecode ``python`` reads (``cpython-313``)."""
    return subprocess.run(  # noqa: S603 - the interpreter found above
        [str(python), "-c", "import sys; print(sys.implementation.cache_tag)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def interpreter_layout(python: Path) -> tuple[Path, str]:
    """The installation prefix of ``python`` and its version (e.g. ``3.13.0``)."""
    out = subprocess.run(  # noqa: S603 - the interpreter found above
        [
            str(python),
            "-c",
            "import sys, platform; print(sys.base_prefix); print(platform.python_version())",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return Path(out[0]), out[1]


def _base_ignore(directory: str, names: list[str]) -> set[str]:
    """What ``python:3.13-slim`` removes after ``make install``: tests, bytecode, static libs."""
    del directory
    return {
        n
        for n in names
        if n in {"test", "tests", "idle_test", "__pycache__", "site-packages"}
        or n.endswith((".pyc", ".pyo"))
        or fnmatch.fnmatch(n, "libpython*.a")
    }


def install_base(prefix: Path, version: str, usr_local: Path) -> None:
    """``/usr/local`` of the base image: the interpreter, libpython and the stdlib without pyc."""
    major_minor = ".".join(version.split(".")[:2])
    (usr_local / "bin").mkdir(parents=True)
    shutil.copy2(prefix / "bin" / f"python{major_minor}", usr_local / "bin")
    for link, target in (("python3", f"python{major_minor}"), ("python", "python3")):
        (usr_local / "bin" / link).symlink_to(target)
    lib = usr_local / "lib"
    lib.mkdir()
    for so in sorted(prefix.glob("lib/libpython*.so*")):
        shutil.copy2(so, lib, follow_symlinks=False)
    shutil.copytree(
        prefix / "lib" / f"python{major_minor}",
        lib / f"python{major_minor}",
        symlinks=True,
        ignore=_base_ignore,
    )
    (lib / f"python{major_minor}" / "site-packages").mkdir()


# --- the Dockerfile ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Instruction:
    line: int
    keyword: str
    args: str

    def __str__(self) -> str:
        return f"{self.keyword} {self.args}"


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comment lines dropped (as Docker does)."""
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1].strip())
            continue
        pending.append(line)
        joined = " ".join(part for part in pending if part)
        pending = []
        keyword, _, args = joined.partition(" ")
        instructions.append(Instruction(start, keyword.upper(), args.strip()))
    if pending:
        raise ReplayError("Dockerfile: a continuation line ends the file")
    return instructions


def dockerignore_patterns(context: Path) -> list[str]:
    path = context / ".dockerignore"
    if not path.exists():
        return []
    patterns = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("!"):
            raise ReplayError(f".dockerignore: exceptions ({line}) are not replayed; teach me")
        patterns.append(line.strip("/"))
    return patterns


def ignored(relative: str, patterns: Sequence[str]) -> bool:
    """Whether ``relative`` (to the context, with /) matches a .dockerignore pattern."""
    for pattern in patterns:
        if pattern.startswith("**/"):
            tail = pattern[3:]
            if any(fnmatch.fnmatchcase(part, tail) for part in relative.split("/")):
                return True
        elif fnmatch.fnmatchcase(relative, pattern) or relative.startswith(pattern + "/"):
            return True
    return False


# --- the build ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Stage:
    name: str
    workdir: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    user: str = "0:0"
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Build:
    """The replay's state: the work directory, the current stage and the earlier stages' roots."""

    work: Path
    context: Path
    base: Path  # the base image's /usr/local, copied into each stage
    python_version: str
    pip_cache: bool
    stage: Stage = field(default_factory=lambda: Stage("(none)"))
    stages: dict[str, Path] = field(default_factory=dict)
    count: int = 0
    steps: list[tuple[str, float]] = field(default_factory=list)
    deviations: list[str] = field(default_factory=list)

    @property
    def rootfs(self) -> Path:
        return self.work / "rootfs"

    def host(self, image_path: str) -> str:
        """The host path of an absolute image path (the replay's root for the image's own)."""
        path = os.path.normpath(image_path)
        if path == "/" or any(
            path == prefix or path.startswith(prefix + "/")
            for prefix in (*IMAGE_PREFIXES, *self.workdirs())
        ):
            return str(self.rootfs) + (path if path != "/" else "")
        return path

    def workdirs(self) -> list[str]:
        return [self.stage.workdir] if self.stage.workdir != "/" else []

    def resolve(self, path: str) -> str:
        """An image path relative to the stage's WORKDIR made absolute."""
        return path if path.startswith("/") else os.path.join(self.stage.workdir, path)

    def host_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """Image environment → host: absolute paths (and PATH-like lists) mapped into the root."""
        mapped = {}
        for key, value in env.items():
            parts = value.split(":")
            if all(p.startswith("/") for p in parts):
                mapped[key] = ":".join(self.host(p) for p in parts)
            else:
                mapped[key] = value
        # The base's RUNPATH is $ORIGIN/../lib; a pyenv build's is its own prefix, which uid
        # 65532 cannot read (/root is 0700): the copied libpython is found this way instead.
        mapped["LD_LIBRARY_PATH"] = str(self.rootfs / "usr" / "local" / "lib")
        return mapped

    def rewrite(self, command: str) -> str:
        return ABSOLUTE.sub(lambda m: self.host(m.group(0)), command)


def expand(value: str, env: Mapping[str, str]) -> str:
    return re.sub(r"\$(?:\{(\w+)\}|(\w+))", lambda m: env.get(m.group(1) or m.group(2), ""), value)


def step_from(build: Build, ins: Instruction) -> None:
    words = ins.args.split()
    if words and words[0].startswith("--"):
        raise ReplayError(f"line {ins.line}: FROM flags ({words[0]}) are not replayed; teach me")
    image = words[0]
    name = words[2] if len(words) == 3 and words[1].lower() == "as" else str(build.count)
    if not BASE_IMAGE.match(image):
        raise ReplayError(f"line {ins.line}: base {image}: the replay stands in for python:3.13")
    if build.rootfs.exists():
        previous = build.work / "stages" / build.stage.name
        previous.parent.mkdir(exist_ok=True, mode=0o755)
        build.rootfs.rename(previous)
        build.stages[build.stage.name] = previous
    build.count += 1
    build.rootfs.mkdir(mode=0o755)
    for skeleton in ("opt", "usr/share/doc", "var/run"):
        (build.rootfs / skeleton).mkdir(parents=True, mode=0o755)
    shutil.copytree(build.base, build.rootfs / "usr" / "local", symlinks=True)
    build.stage = Stage(
        name,
        env={"PATH": BASE_PATH, "PYTHON_VERSION": build.python_version, "HOME": "/root"},
    )
    say(f"  new root {build.rootfs} with /usr/local = CPython {build.python_version} (no .pyc)")


def step_workdir(build: Build, ins: Instruction) -> None:
    build.stage.workdir = build.resolve(ins.args)
    Path(build.host(build.stage.workdir)).mkdir(parents=True, exist_ok=True, mode=0o755)


def step_env(build: Build, ins: Instruction) -> None:
    words = shlex.split(ins.args)
    if "=" in words[0]:
        pairs = [(w.partition("=")[0], w.partition("=")[2]) for w in words]
    else:  # the legacy form, ``ENV KEY value with spaces``
        pairs = [(words[0], " ".join(words[1:]))]
    for key, value in pairs:
        build.stage.env[key] = expand(value, build.stage.env)


def step_copy(build: Build, ins: Instruction) -> None:
    words = shlex.split(ins.args)
    source_root, patterns = build.context, dockerignore_patterns(build.context)
    while words and words[0].startswith("--"):
        flag = words.pop(0)
        if not flag.startswith("--from="):
            raise ReplayError(f"line {ins.line}: COPY {flag} is not replayed; teach me")
        stage = flag.removeprefix("--from=")
        if stage not in build.stages:
            raise ReplayError(f"line {ins.line}: COPY --from={stage}: no such earlier stage")
        source_root, patterns = build.stages[stage], []
    *sources, dest = words
    dest_image = build.resolve(dest)
    dest_host = Path(build.host(dest_image))
    for source in sources:
        origin = source_root / source.lstrip("/")
        if not origin.exists():
            raise ReplayError(f"line {ins.line}: COPY {source}: not in {source_root}")
        if origin.is_dir():

            def skip(directory: str, names: list[str], root: Path = source_root) -> set[str]:
                rel = os.path.relpath(directory, root)
                return {
                    n for n in names if ignored(os.path.normpath(os.path.join(rel, n)), patterns)
                }

            shutil.copytree(origin, dest_host, symlinks=True, ignore=skip, dirs_exist_ok=True)
        else:
            target = (
                dest_host / origin.name if dest.endswith("/") or dest_host.is_dir() else dest_host
            )
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
            shutil.copy2(origin, target)


def step_run(build: Build, ins: Instruction) -> None:
    if ins.args.startswith("["):
        raise ReplayError(f"line {ins.line}: RUN in exec form is not replayed; teach me")
    if ins.args.startswith("--"):
        raise ReplayError(f"line {ins.line}: RUN flags are not replayed; teach me")
    command = build.rewrite(ins.args)
    env = build.host_env(build.stage.env)
    if build.pip_cache and env.pop("PIP_NO_CACHE_DIR", None) is not None:
        note = "PIP_NO_CACHE_DIR dropped: ~/.cache/pip reused (downloads only, hashes checked)"
        if note not in build.deviations:
            build.deviations.append(note)
    say(f"  $ {command}")
    run = subprocess.run(  # noqa: S603 - the Dockerfile's own command, as docker build runs it
        ["/bin/sh", "-c", command],
        cwd=build.host(build.stage.workdir),
        env=env,
        check=False,
    )
    if run.returncode != 0:
        raise ReplayError(f"line {ins.line}: RUN exited {run.returncode}: {command}")


def step_user(build: Build, ins: Instruction) -> None:
    build.stage.user = ins.args


def step_exec_form(build: Build, ins: Instruction) -> None:
    try:
        value = json.loads(ins.args)
    except json.JSONDecodeError:
        raise ReplayError(f"line {ins.line}: {ins.keyword} in shell form; teach me") from None
    if ins.keyword == "ENTRYPOINT":
        build.stage.entrypoint = list(value)
    else:
        build.stage.cmd = list(value)


def step_record(build: Build, ins: Instruction) -> None:
    del build, ins  # metadata: nothing in the file system


STEPS: Final[dict[str, Callable[[Build, Instruction], None]]] = {
    "FROM": step_from,
    "WORKDIR": step_workdir,
    "ENV": step_env,
    "COPY": step_copy,
    "RUN": step_run,
    "USER": step_user,
    "ENTRYPOINT": step_exec_form,
    "CMD": step_exec_form,
    "LABEL": step_record,
    "EXPOSE": step_record,
}


def build_image(dockerfile: Path, work: Path, python: Path, *, pip_cache: bool) -> Build:
    prefix, version = interpreter_layout(python)
    say(f"[base] CPython {version} from {prefix}, laid out as python:3.13-slim's /usr/local")
    started = time.monotonic()
    base = work / "base" / "usr-local"
    base.parent.mkdir(mode=0o755)
    install_base(prefix, version, base)
    build = Build(work, dockerfile.parent, base, version, pip_cache)
    build.steps.append(("base interpreter copy", time.monotonic() - started))
    for ins in parse_dockerfile(dockerfile.read_text(encoding="utf-8")):
        handler = STEPS.get(ins.keyword)
        if handler is None:
            raise ReplayError(f"line {ins.line}: {ins.keyword} is not replayed; teach me")
        say(f"[{build.stage.name if ins.keyword != 'FROM' else 'FROM'}] line {ins.line}: {ins}")
        started = time.monotonic()
        handler(build, ins)
        build.steps.append((f"line {ins.line}: {ins.keyword}", time.monotonic() - started))
    if build.stage.user == "0:0":
        raise ReplayError("the final stage has no USER: the image would run as root")
    return build


# --- the image as built ------------------------------------------------------------------------


def owner_ids(user: str) -> tuple[int, int]:
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        raise ReplayError(f"USER {user}: the replay needs numeric ids")
    return int(uid), int(gid or uid)


def writable_by_other(st: os.stat_result) -> bool:
    return bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def check_read_only(tree: Path, uid: int) -> int:
    """Every entry under ``tree`` is root-owned and writable by its owner only; ``tree``'s
    ancestors can be traversed by ``uid`` but not written. Returns how many entries."""
    problems: list[str] = []
    for ancestor in [*reversed(tree.parents), tree]:
        st = ancestor.stat()
        if not st.st_mode & stat.S_IXOTH:
            problems.append(f"{ancestor}: not traversable by uid {uid} (mode {st.st_mode:o})")
        sticky = bool(st.st_mode & stat.S_ISVTX)
        if st.st_uid == uid or (writable_by_other(st) and not sticky):
            problems.append(f"{ancestor}: writable by uid {uid} (mode {st.st_mode:o})")
    count = 0
    for path in walk(tree):
        st = path.lstat()
        count += 1
        if st.st_uid != 0 or st.st_gid != 0:
            problems.append(f"{path}: owned by {st.st_uid}:{st.st_gid}, not root")
        elif not stat.S_ISLNK(st.st_mode) and writable_by_other(st):
            problems.append(f"{path}: mode {stat.filemode(st.st_mode)} lets others write")
    if problems:
        raise ReplayError("not read-only for the image's user:\n  " + "\n  ".join(problems[:20]))
    return count


def walk(tree: Path, skip: Path | None = None) -> Iterator[Path]:
    """Every entry under ``tree``, not following symlinks, without ``skip`` and what it holds."""
    for directory, dirs, files in os.walk(tree):
        here = Path(directory)
        dirs[:] = [name for name in dirs if here / name != skip]
        for name in (*dirs, *files):
            yield here / name


@dataclass(frozen=True, slots=True)
class Venv:
    distributions: list[str]
    nicguard: str
    modules: int  # .py files in the venv
    without_bytecode: list[str]  # those of them with no .pyc for the image's interpreter


def inspect_venv(venv: Path, cache_tag: str) -> Venv:
    site = next(venv.glob("lib/python*/site-packages"))
    dists = sorted(p.name.removesuffix(".dist-info") for p in site.glob("*.dist-info"))
    nicguard = next((d for d in dists if d.lower().startswith("nicguard-")), "")
    modules, missing = bytecode(venv, cache_tag)
    return Venv(dists, nicguard, modules, missing)


def bytecode(tree: Path, cache_tag: str) -> tuple[int, list[str]]:
    """How many .py files ``tree`` holds, and those without ``__pycache__/<name>.<tag>.pyc``."""
    sources = [p for p in walk(tree) if p.suffix == ".py" and p.is_file()]
    missing = [
        str(p)
        for p in sources
        if not (p.parent / "__pycache__" / f"{p.stem}.{cache_tag}.pyc").exists()
    ]
    return len(sources), missing


# --- watching what the image writes ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Write:
    call: str
    path: str
    ok: bool
    errno: str

    def __str__(self) -> str:
        return f"{self.call} {self.path} " + ("ok" if self.ok else self.errno)


def bytecode_reads(directory: Path) -> int:
    """How many .pyc files the strace -ff logs in ``directory`` show opened (successfully)."""
    count = 0
    for log in sorted(directory.glob("trace.*")):
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            match = STRACE_LINE.match(line)
            if match is None or match["call"] not in OPEN_CALLS or match["ret"] in ("-1", "?"):
                continue
            paths = QUOTED.findall(match["args"])
            count += bool(paths) and paths[0].endswith(".pyc")
    return count


def parse_trace(directory: Path) -> list[Write]:
    """Every write-like system call in strace -ff -y logs, with the path it touches."""
    writes: list[Write] = []
    for log in sorted(directory.glob("trace.*")):
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            match = STRACE_LINE.match(line)
            if match is None:
                continue
            call, args = match["call"], match["args"]
            if (
                call in OPEN_CALLS
                and call != "creat"
                and not WRITE_FLAG.search(QUOTED.sub("", args))
            ):
                continue
            ok = match["ret"] not in ("-1", "?")
            for path in written_paths(call, args):
                writes.append(Write(call, path, ok, match["errno"] or ""))
    return writes


def written_paths(call: str, args: str) -> list[str]:
    strings = [s.encode().decode("unicode_escape") for s in QUOTED.findall(args)]
    if not strings:
        return []  # utimensat(fd, NULL, ...) and other fd-only forms
    if call in {"symlink", "symlinkat", "link", "linkat"}:
        strings = strings[-1:]
    elif call not in {"rename", "renameat", "renameat2"}:
        strings = strings[:1]
    base = DIRFD.match(args)
    paths = []
    for s in strings:
        if not s.startswith("/"):
            s = os.path.join(base["dir"] if base else "/", s)
        paths.append(os.path.normpath(s))
    return paths


def inside(path: str, directory: Path) -> bool:
    return path == str(directory) or path.startswith(f"{directory}/")


Snapshot = dict[str, tuple[int, int, int]]


def snapshot(trees: Sequence[Path], skip: Path, uid: int) -> Snapshot:
    """mtime, size and mode of every entry in ``trees`` (bar ``skip``), and of everything ``uid``
    owns in the temporary directories (anything it makes there is owned by it)."""
    seen: Snapshot = {}
    for tree in trees:
        for path in walk(tree, skip):
            st = path.lstat()
            seen[str(path)] = (st.st_mtime_ns, st.st_size, st.st_mode)
    for temp in TEMP_DIRS:
        with contextlib.suppress(OSError), os.scandir(temp) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid == uid:
                        seen[entry.path] = (0, 0, 0)
                        for path in walk(Path(entry.path)):
                            seen[str(path)] = (0, 0, 0)
    return seen


def changed(before: Snapshot, after: Snapshot) -> list[str]:
    return sorted(
        [f"new {p}" for p in after.keys() - before.keys()]
        + [f"gone {p}" for p in before.keys() - after.keys()]
        + [f"changed {p}" for p in before.keys() & after.keys() if before[p] != after[p]]
    )


# --- running the image -------------------------------------------------------------------------


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass(frozen=True, slots=True)
class Image:
    """How to run the built image: its root, user, environment and entrypoint."""

    rootfs: Path
    uid: int
    gid: int
    env: dict[str, str]
    entrypoint: list[str]
    traces: Path
    logs: Path

    def argv(self, args: Sequence[str], trace: str | None) -> list[str]:
        drop = [
            shutil.which("setpriv") or "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--",
        ]
        command = [*drop, *self.entrypoint, *args]
        if trace is None:
            return command
        out = self.traces / trace
        out.mkdir(parents=True, mode=0o700)
        strace = [shutil.which("strace") or "strace", "-ff", "-qq", "-y", "-s", "4096"]
        return [*strace, "-e", f"trace={WRITE_CALLS}", "-o", str(out / "trace"), *command]

    def popen(
        self,
        name: str,
        args: Sequence[str],
        trace: str | None,
        env: Mapping[str, str] | None = None,
    ) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.logs / f"{name}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(  # noqa: S603 - our own argv
                self.argv(args, trace),
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=sink,
                cwd=self.rootfs,  # the image's WORKDIR: /
                env=dict(env if env is not None else self.env),
                preexec_fn=_die_with_parent,  # the caller is single-threaded
            )
        return process, log

    def run(
        self,
        name: str,
        args: Sequence[str],
        trace: str | None,
        env: Mapping[str, str] | None = None,
    ) -> Ran:
        started, cpu = time.monotonic(), children_cpu()
        out, err = self.logs / f"{name}.out", self.logs / f"{name}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            done = subprocess.run(  # noqa: S603 - our own argv
                self.argv(args, trace),
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                cwd=self.rootfs,
                env=dict(env if env is not None else self.env),
                timeout=TIMEOUT,
                check=False,
            )
        return Ran(
            [*self.entrypoint, *args],
            done.returncode,
            out.read_text(encoding="utf-8"),
            err.read_text(encoding="utf-8"),
            time.monotonic() - started,
            children_cpu() - cpu,
        )


def children_cpu() -> float:
    """User + system CPU seconds of the children waited for so far (one runs at a time)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True, slots=True)
class Ran:
    argv: list[str]
    status: int
    stdout: str
    stderr: str
    seconds: float
    cpu_seconds: float


@dataclass(slots=True)
class Served:
    ready_seconds: float = 0.0
    readyz: int | None = None
    drifted: dict[str, Any] = field(default_factory=dict)
    good: dict[str, Any] = field(default_factory=dict)
    ids: str = ""
    status: int | None = None
    log: str = ""


@dataclass(slots=True)
class Report:
    python: str = ""
    reference_python: str = ""
    build: Build | None = None
    venv: Venv | None = None
    stdlib_modules: int = 0
    stdlib_without_bytecode: list[str] = field(default_factory=list)
    checked_entries: int = 0
    cert_dir: str = ""
    rootfs: str = ""
    version: Ran | None = None
    checks: list[tuple[Ran, Ran]] = field(default_factory=list)
    untraced: list[Ran] = field(default_factory=list)
    untraced_reference: list[Ran] = field(default_factory=list)
    exact_env: Ran | None = None
    bytecode_reads: int = 0  # .pyc files the traced runs opened
    served: Served = field(default_factory=Served)
    writes_in_cert_dir: list[str] = field(default_factory=list)
    writes_outside: list[str] = field(default_factory=list)
    attempts: list[Write] = field(default_factory=list)
    exact_env_attempts: list[Write] = field(default_factory=list)
    snapshot_changes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def check_cpu_seconds(self) -> float:
        """The median CPU (user + system) of one untraced ``nicguard check`` in the image."""
        return median(r.cpu_seconds for r in self.untraced)


def review(url: str, context: ssl.SSLContext, name: str) -> dict[str, Any]:
    body = (ROOT / "examples" / "reviews" / f"{name}.json").read_bytes()
    request = urllib.request.Request(  # noqa: S310 - a loopback https URL
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10, context=context) as reply:  # noqa: S310
        answer: dict[str, Any] = json.loads(reply.read())
    return answer["response"]  # type: ignore[no-any-return]


def child_of(pid: int) -> int:
    """The tracee strace started (setpriv execs nicguard in the same process)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="ascii").split()
    if not children:
        raise ReplayError(f"strace (pid {pid}) has no child")
    return int(children[0])


def serve(image: Image, state: Path, cert_dir: Path) -> Served:
    port, probe_port = free_ports(2)
    args = [
        "serve", "--state", str(state), "--cert-dir", str(cert_dir), "--host", "127.0.0.1",
        "--port", str(port), "--probe-port", str(probe_port),
    ]  # fmt: skip
    served = Served()
    started = time.monotonic()
    process, log = image.popen("serve", args, trace="serve")
    try:
        probes = f"http://127.0.0.1:{probe_port}"
        wait_until(
            lambda: http_status(f"{probes}/readyz") == 200 or None,
            timeout=TIMEOUT,
            what="nicguard serve (the image) to be ready",
            diagnose=lambda: log.read_text(encoding="utf-8", errors="replace")[-4000:],
        )
        served.ready_seconds = time.monotonic() - started
        nicguard = child_of(process.pid)
        status = Path(f"/proc/{nicguard}/status").read_text(encoding="ascii").splitlines()
        served.ids = "; ".join(s for s in status if s.startswith(("Uid:", "Gid:", "Groups:")))
        context = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
        url = f"https://127.0.0.1:{port}/validate"
        served.drifted = review(url, context, REVIEW)
        served.good = review(url, context, "good-runtime")
        served.readyz = http_status(f"{probes}/readyz")
        os.kill(nicguard, signal.SIGTERM)
        served.status = process.wait(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            with contextlib.suppress(ReplayError, OSError):
                os.kill(child_of(process.pid), signal.SIGKILL)
            process.kill()
            process.wait(timeout=TIMEOUT)
        served.log = log.read_text(encoding="utf-8", errors="replace")
    return served


def reference(args: Sequence[str]) -> Ran:
    """The same command on the repository's development venv (``make``'s .venv), as root."""
    nicguard = ROOT / ".venv" / "bin" / "nicguard"
    argv = [str(nicguard)] if nicguard.exists() else [sys.executable, "-m", "app"]
    started, cpu = time.monotonic(), children_cpu()
    done = subprocess.run(  # noqa: S603 - our own argv
        [*argv, *args], capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT, check=False
    )
    return Ran(
        [*argv, *args],
        done.returncode,
        done.stdout,
        done.stderr,
        time.monotonic() - started,
        children_cpu() - cpu,
    )


def reference_python() -> str:
    python = ROOT / ".venv" / "bin" / "python"
    exe = str(python) if python.exists() else sys.executable
    version = subprocess.run(  # noqa: S603 - the development venv's interpreter
        [exe, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return f"{version} ({exe})"


def preflight() -> None:
    if os.geteuid() != 0:
        raise ReplayError(
            "needs root: the image runs as uid 65532 (setpriv drops to it) and the tree must be "
            "root-owned; run as root (CI does) or with sudo"
        )
    for tool, package in (("strace", "strace"), ("setpriv", "util-linux")):
        if shutil.which(tool) is None:
            raise ReplayError(f"no {tool} on PATH: apt-get install {package} (make strace)")


def replay(
    work: Path,
    *,
    python: str | None = None,
    dockerfile: Path = ROOT / "Dockerfile",
    pip_cache: bool = True,
) -> Report:
    """Build the image in ``work`` (empty or absent), run it, and say what it did."""
    preflight()
    os.umask(0o022)  # what docker build's layers get, whatever the caller's umask
    report = Report()
    interpreter = find_python313(python)
    report.python = str(interpreter)
    report.reference_python = reference_python()
    if work.exists() and any(work.iterdir()):
        raise ReplayError(f"{work} is not empty")
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)

    say(f"[replay] {dockerfile} in {work}")
    build = build_image(dockerfile, work, interpreter, pip_cache=pip_cache)
    report.build = build
    uid, gid = owner_ids(build.stage.user)
    rootfs = build.rootfs
    report.rootfs = str(rootfs)

    say("[image] the final stage's root is the image; what the build stages left is set aside")
    shutil.rmtree(work / "stages")
    shutil.rmtree(work / "base")
    venv = Path(build.host("/opt/nicguard"))
    cache_tag = interpreter_cache_tag(interpreter)
    report.venv = inspect_venv(venv, cache_tag)
    say(f"  venv distributions: {', '.join(report.venv.distributions)}")
    say(
        f"  venv modules without {cache_tag} bytecode: {len(report.venv.without_bytecode)} "
        f"of {report.venv.modules}"
    )
    stdlib = Path(
        build.host(f"/usr/local/lib/python{'.'.join(build.python_version.split('.')[:2])}")
    )
    report.stdlib_modules, report.stdlib_without_bytecode = bytecode(stdlib, cache_tag)
    say(
        f"  standard library modules without bytecode: {len(report.stdlib_without_bytecode)} "
        f"of {report.stdlib_modules}"
    )

    state = work / "state"
    shutil.copytree(ROOT / "examples", state / "examples")
    for path in [state, *walk(state)]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    report.checked_entries = check_read_only(rootfs, uid) + check_read_only(state, uid)
    say(f"  {report.checked_entries} entries root-owned, not writable by uid {uid}")
    for tree in (ROOT,):  # the repository itself, which the image never sees
        st = tree.stat()
        if st.st_uid == uid or writable_by_other(st):
            raise ReplayError(f"{tree}: writable by uid {uid} (mode {st.st_mode:o})")

    image_env = dict(build.stage.env)
    cert_image = image_env.get(CERT_DIR_ENV, DEFAULT_CERT_DIR)
    cert_dir = Path(build.host(cert_image))
    cert_dir.mkdir(parents=True, mode=0o700)
    for parent in cert_dir.parents:
        if parent == rootfs:
            break
        parent.chmod(0o755)
    os.chown(cert_dir, uid, gid)
    report.cert_dir = str(cert_dir)
    say(f"  certificate directory {cert_image} -> {cert_dir}, owned {uid}:{gid}, mode 0700")

    env = build.host_env({**image_env, "HOME": "/"})
    exact = dict(env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    say(f"[run] as {uid}:{gid} (setpriv, no groups), cwd / = {rootfs}, HOME=/ (root-owned)")
    say("  PYTHONDONTWRITEBYTECODE removed: a module compiled at run time would try to write")
    traces, logs = work / "traces", work / "logs"
    traces.mkdir(mode=0o700)
    logs.mkdir(mode=0o700)
    image = Image(rootfs, uid, gid, env, build.stage.entrypoint, traces, logs)

    before = snapshot([rootfs, state], cert_dir, uid)
    report.version = image.run("version", ["--version"], trace="version")
    say(f"  nicguard --version -> {report.version.status}: {report.version.stdout.strip()}")
    cluster, objects = state / "examples" / "cluster", state / "examples" / "objects"
    for name, args in (
        ("check-drifted", ["--state", str(cluster), str(objects / "drifted-runtime.yaml")]),
        ("check-good", ["--state", str(cluster), str(objects / "good-trainjob.yaml")]),
        ("check-all-json", ["--state", str(cluster), "--output", "json", str(objects)]),
    ):
        ran = image.run(name, ["check", *args], trace=name)
        ref = reference(["check", *args])
        report.checks.append((ran, ref))
        same = (ran.status, ran.stdout, ran.stderr) == (ref.status, ref.stdout, ref.stderr)
        say(
            f"  nicguard check ({name}) -> {ran.status} in {ran.seconds:.2f} s traced; "
            f"reference {ref.status} in {ref.seconds:.2f} s; output identical: {same}"
        )
    report.served = serve(image, cluster, cert_dir)
    say(
        f"  nicguard serve: ready after {report.served.ready_seconds:.2f} s traced, "
        f"{REVIEW} allowed={report.served.drifted.get('allowed')}, "
        f"/readyz {report.served.readyz}, SIGTERM -> exit {report.served.status}"
    )
    say(f"  ({report.served.ids})")
    drifted_args = ["check", "--state", str(cluster), str(objects / "drifted-runtime.yaml")]
    for round_ in range(ROUNDS):  # interleaved: both see the same load
        report.untraced.append(image.run(f"check-untraced-{round_}", drifted_args, trace=None))
        report.untraced_reference.append(reference(drifted_args))
    image_s = sorted(r.seconds for r in report.untraced)
    reference_s = sorted(r.seconds for r in report.untraced_reference)
    say(
        f"  nicguard check untraced, median (min) of {ROUNDS}: {median(image_s):.2f} s "
        f"({image_s[0]:.2f}) on {build.python_version}, vs "
        f"{median(reference_s):.2f} s ({reference_s[0]:.2f}) on {report.reference_python}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    say(
        f"  nicguard check CPU per start, median of {ROUNDS}: "
        f"{report.check_cpu_seconds:.2f} s (target <= {MAX_CHECK_CPU_SECONDS} s), "
        f"reference {median(r.cpu_seconds for r in report.untraced_reference):.2f} s"
    )
    report.exact_env = image.run("check-exact-env", drifted_args, trace="exact-env", env=exact)
    after = snapshot([rootfs, state], cert_dir, uid)

    report.snapshot_changes = changed(before, after)
    for trace in sorted(traces.iterdir()):
        report.bytecode_reads += bytecode_reads(trace)
        for write in parse_trace(trace):
            if write.path in NOT_FILES:
                continue
            if inside(write.path, cert_dir):
                report.writes_in_cert_dir.append(f"[{trace.name}] {write}")
            elif write.ok:
                report.writes_outside.append(f"[{trace.name}] {write}")
            elif trace.name == "exact-env":
                report.exact_env_attempts.append(write)
            else:
                report.attempts.append(write)
    summarize(report)
    return report


def where(path: str, rootfs: str) -> str:
    """The image directory a host path is in, to three levels (``/usr/local/lib``)."""
    image = path.removeprefix(rootfs) if inside(path, Path(rootfs)) else f"(host) {path}"
    return "/".join(image.split("/")[:4])


def summarize(report: Report) -> None:
    failures = report.failures
    venv = report.venv
    assert venv is not None  # noqa: S101 - set by replay()
    kept = [
        d for d in venv.distributions if d.split("-")[0].lower() in {"pip", "setuptools", "wheel"}
    ]
    if kept:
        failures.append(f"the venv keeps {', '.join(kept)}")
    if venv.without_bytecode:
        failures.append(f"venv modules without bytecode: {venv.without_bytecode[:3]}")
    if report.stdlib_without_bytecode:
        failures.append(f"stdlib modules without bytecode: {report.stdlib_without_bytecode[:3]}")
    if report.attempts or report.exact_env_attempts:
        failures.append(
            f"compiled at run time: {[*report.attempts, *report.exact_env_attempts][:3]}"
        )
    if not report.bytecode_reads:
        failures.append("no .pyc read: the trace missed the imports?")
    if report.version is None or report.version.status != 0:
        failures.append("nicguard --version failed")
    for ran, ref in report.checks:
        if (ran.status, ran.stdout, ran.stderr) != (ref.status, ref.stdout, ref.stderr):
            failures.append(
                f"{' '.join(ran.argv)}: {ran.status} {ran.stdout!r} {ran.stderr!r} differs from "
                f"the reference: {ref.status} {ref.stdout!r} {ref.stderr!r}"
            )
    served = report.served
    causes = served.drifted.get("status", {}).get("details", {}).get("causes", [{}])
    if served.drifted.get("allowed") is not False or causes[0].get("reason") != (
        "MappingDivergesFromRecipe"
    ):
        failures.append(f"serve: {REVIEW} answered {served.drifted}")
    if served.good.get("allowed") is not True:
        failures.append(f"serve: good-runtime answered {served.good}")
    if served.readyz != 200:
        failures.append(f"serve: /readyz {served.readyz}")
    if served.status != 0:
        failures.append(f"serve: SIGTERM -> exit {served.status}\n{served.log[-3000:]}")
    if report.exact_env is None or report.exact_env.status != 1:
        failures.append("check with the image's exact environment did not deny")
    if report.writes_outside:
        failures.append("wrote outside the cert dir: " + "; ".join(report.writes_outside[:20]))
    if report.snapshot_changes:
        failures.append("changed outside the cert dir: " + "; ".join(report.snapshot_changes[:20]))
    if not report.writes_in_cert_dir:
        failures.append("nothing written in the cert dir: the trace missed the certificates?")

    say("[writes]")
    say(f"  in the cert dir: {len(report.writes_in_cert_dir)}")
    for line in report.writes_in_cert_dir:
        say(f"    {line}")
    say(f"  outside it, succeeded (strace): {len(report.writes_outside)}")
    for line in report.writes_outside:
        say(f"    {line}")
    say(f"  outside it, changed (before/after snapshot): {len(report.snapshot_changes)}")
    for line in report.snapshot_changes:
        say(f"    {line}")
    kinds = Counter(
        f"{w.call} {w.errno} {'__pycache__' if '__pycache__' in w.path else 'other'} "
        f"under {where(w.path, report.rootfs)}"
        for w in report.attempts
    )
    say(f"  outside it, refused (PYTHONDONTWRITEBYTECODE unset): {len(report.attempts)}")
    say(f"  bytecode files read by the traced runs: {report.bytecode_reads}")
    for kind, count in kinds.most_common():
        say(f"    {count:5d} x {kind}")
    for write in [w for w in report.attempts if "__pycache__" not in w.path][:20]:
        say(f"    {write}")
    say(f"  attempted with the image's exact environment: {len(report.exact_env_attempts)}")
    for write in report.exact_env_attempts[:20]:
        say(f"    {write}")
    build = report.build
    assert build is not None  # noqa: S101 - set by replay()
    say("[timings]")
    for what, seconds in build.steps:
        say(f"  {seconds:7.2f} s  {what}")
    for note in build.deviations:
        say(f"[deviation] {note}")
    say("[deviation] LD_LIBRARY_PATH names the copied libpython (the base uses $ORIGIN/../lib)")
    if failures:
        say("[result] FAIL")
        for failure in failures:
            say(f"  - {failure}")
    else:
        say("[result] PASS: the image serves, checks and writes nothing outside its cert dir")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="image_replay", description=__doc__.splitlines()[0])
    parser.add_argument("--python", help="Python 3.13 (default: $PYTHON313, pyenv, PATH)")
    parser.add_argument("--work", type=Path, help="an empty or absent directory (default: new)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--dockerfile", type=Path, default=ROOT / "Dockerfile")
    parser.add_argument(
        "--no-pip-cache", action="store_true", help="keep the Dockerfile's PIP_NO_CACHE_DIR"
    )
    options = parser.parse_args(argv)
    work = options.work or Path(tempfile.mkdtemp(prefix="nicguard-image-"))
    try:
        report = replay(
            work,
            python=options.python or None,
            dockerfile=options.dockerfile,
            pip_cache=not options.no_pip_cache,
        )
    except ReplayError as error:
        say(f"image-replay: {error}")
        return 1
    finally:
        if options.keep:
            say(f"[replay] kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
