"""Child processes for the e2e tier: loopback ports, logged processes stopped by PID, polling.

Every process started here is stopped by its own PID: by ``stop()`` (terminate, wait, kill),
by an ``atexit`` hook if the caller forgot, and by the kernel (``PR_SET_PDEATHSIG``) if the
Python process itself dies without running either.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final, TypeVar

T = TypeVar("T")

POLL_INTERVAL: Final = 0.1
STOP_TIMEOUT: Final = 10.0
LOG_TAIL_BYTES: Final = 6000
_PR_SET_PDEATHSIG: Final = 1
# ``nicguard`` as the interpreter running us runs it: no dependence on where a venv lives.
NICGUARD: Final = (sys.executable, "-m", "app")


class WaitTimeoutError(AssertionError):
    """A polled condition did not hold before its deadline."""


def tool(name: str) -> Path:
    """The executable ``name`` on PATH, else beside the running interpreter (a venv's bin/)."""
    found = shutil.which(name)
    return Path(found) if found else Path(sys.executable).parent / name


def run_nicguard(kubeconfig: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``nicguard ARGS`` against the cluster of ``kubeconfig``, with no NICGUARD_* setting of the
    caller's shell and no in-cluster configuration."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("NICGUARD_", "KUBERNETES_SERVICE_"))
    }
    env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run(
        [str(tool("nicguard")), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (all held open together while chosen)."""
    with contextlib.ExitStack() as stack:
        sockets = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [int(sock.getsockname()[1]) for sock in sockets]


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = POLL_INTERVAL,
    diagnose: Callable[[], str] = lambda: "",
) -> T:
    """Call ``probe`` until it returns something other than None; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result is not None:
            return result
        if time.monotonic() >= deadline:
            raise WaitTimeoutError(
                f"timed out after {timeout:.0f}s waiting for {what}\n{diagnose()}"
            )
        time.sleep(interval)  # the pause between two polls of a condition, not a synchronisation


def http_status(
    url: str, *, context: ssl.SSLContext | None = None, token: str | None = None
) -> int | None:
    """The HTTP status of a GET, or None when nothing answers (yet)."""
    request = urllib.request.Request(url)  # noqa: S310 - the URLs are ours, on loopback
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as reply:  # noqa: S310
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return error.code
    except (OSError, ssl.SSLError):
        return None


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Process:
    """A child process whose stdout and stderr go to one log file."""

    _live: Final[set[Process]] = set()

    def __init__(
        self, name: str, argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self.name, self.argv, self.log = name, list(argv), log
        with log.open("ab") as sink:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                preexec_fn=_die_with_parent,  # the pytest and demo callers are single-threaded
            )
        self.pid = self._popen.pid
        Process._live.add(self)

    def running(self) -> bool:
        return self._popen.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM the PID, wait up to ``timeout`` s, then SIGKILL it; returns the exit status."""
        try:
            if self._popen.poll() is None:
                self._popen.terminate()
                try:
                    self._popen.wait(timeout)
                except subprocess.TimeoutExpired:
                    self._popen.kill()
                    self._popen.wait(timeout)
        finally:
            Process._live.discard(self)
        return self._popen.returncode

    def wait(self, timeout: float = STOP_TIMEOUT) -> int:
        """The exit status, once the process has exited by itself within ``timeout`` s."""
        return self._popen.wait(timeout)

    def kill(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGKILL the PID at once (a crash, not a shutdown) and reap it; returns the status."""
        try:
            if self._popen.poll() is None:
                self._popen.kill()
            self._popen.wait(timeout)
        finally:
            Process._live.discard(self)
        return self._popen.returncode

    def signal(self, signum: signal.Signals) -> None:
        """Send ``signum`` to the PID (e.g. a control signal the process handles)."""
        if self._popen.poll() is None:
            self._popen.send_signal(signum)

    def tail(self, limit: int = LOG_TAIL_BYTES) -> str:
        try:
            data = self.log.read_bytes()
        except OSError as error:
            return f"(no log: {error})"
        return data[-limit:].decode("utf-8", errors="replace")

    def report(self) -> str:
        state = "running" if self.running() else f"exited {self._popen.returncode}"
        return f"----- {self.name} (pid {self.pid}, {state}) {self.log} -----\n{self.tail()}"

    @classmethod
    def stop_all(cls) -> None:
        for process in list(cls._live):
            with contextlib.suppress(Exception):
                process.stop()


atexit.register(Process.stop_all)
