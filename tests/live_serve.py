"""``nicguard serve`` of ``examples/cluster`` as a live process on loopback ports, for the tests
that need one (TLS, hostile clients, logs, shutdown, metric names)."""

from __future__ import annotations

import contextlib
import os
import ssl
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.harness.procs import NICGUARD, Process, free_ports, http_status, wait_until
from tests.support.paths import ROOT

STATE: Final = ROOT / "examples" / "cluster"
READY_TIMEOUT: Final = 30.0


@dataclass(frozen=True, slots=True)
class LiveServe:
    process: Process
    port: int
    probe_port: int
    cert_dir: Path

    @property
    def ca(self) -> Path:
        return self.cert_dir / "ca.crt"

    @property
    def context(self) -> ssl.SSLContext:
        """A client context trusting the CA nicguard generated."""
        return ssl.create_default_context(cafile=str(self.ca))

    @property
    def probes(self) -> str:
        return f"http://127.0.0.1:{self.probe_port}"

    def log_text(self) -> str:
        return self.process.log.read_text(errors="replace")


@contextlib.contextmanager
def live_serve(workdir: Path, *args: str) -> Iterator[LiveServe]:
    """Started with ``args`` added, its certificates generated into ``workdir/certs``, its
    output in ``workdir/nicguard.log`` and no ``NICGUARD_*`` setting from our environment;
    yielded once ``/readyz`` answers 200, stopped by PID afterwards."""
    port, probe_port = free_ports(2)
    cert_dir = workdir / "certs"
    argv = [*NICGUARD, "serve", f"--state={STATE}", "--host=127.0.0.1", f"--cert-dir={cert_dir}"]
    argv += [f"--port={port}", f"--probe-port={probe_port}", *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NICGUARD_")}
    process = Process("nicguard", argv, workdir / "nicguard.log", env=env)
    served = LiveServe(process, port, probe_port, cert_dir)
    try:
        wait_until(
            lambda: http_status(f"{served.probes}/readyz") == 200 or None,
            timeout=READY_TIMEOUT,
            what="nicguard /readyz",
            diagnose=process.report,
        )
        yield served
    finally:
        process.stop()


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak since start) of ``pid``, in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0])
    return fields


def closed_counts(probe_port: int) -> dict[str, float]:
    """nicguard_connections_closed_total of the webhook listener, by reason."""
    url = f"http://127.0.0.1:{probe_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as reply:
        text = reply.read().decode()
    return {
        line.split('reason="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith('nicguard_connections_closed_total{listener="webhook"')
    }
