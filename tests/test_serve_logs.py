"""What ``nicguard serve`` writes on stdout from start to stop, as a process: one JSON object per
line with the fields Cloud Logging reads (``time``, ``severity``, ``message``) plus ``logger``,
and each of uvicorn's start and stop lines once although two servers share the process."""

from __future__ import annotations

import json
import re
import signal
from collections import Counter
from pathlib import Path
from typing import Any, Final

from tests.live_serve import live_serve

RFC3339_UTC_MILLIS: Final = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
TIMEOUT: Final = 30.0


def _serve_then_stop(tmp_path: Path) -> list[dict[str, Any]]:
    with live_serve(tmp_path) as served:
        served.process.signal(signal.SIGTERM)
        assert served.process.wait(TIMEOUT) == 0
        log = served.process.log
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_every_line_has_the_fields_cloud_logging_reads_and_uvicorn_speaks_once(
    tmp_path: Path,
) -> None:
    lines = _serve_then_stop(tmp_path)
    for line in lines:
        assert list(line)[:4] == ["time", "severity", "message", "logger"], line
        assert RFC3339_UTC_MILLIS.match(line["time"]), line
        assert line["severity"] in {"DEBUG", "INFO", "WARNING", "ERROR"}, line
        assert not {"ts", "level", "msg"} & set(line), line
    uvicorn = Counter(line["message"] for line in lines if line["logger"].startswith("uvicorn"))
    repeated = {message: count for message, count in uvicorn.items() if count > 1}
    assert repeated == {}
    started = [m for m in uvicorn if m.startswith("Started server process")]
    finished = [m for m in uvicorn if m.startswith("Finished server process")]
    assert (len(started), len(finished)) == (1, 1)
    for message in (
        "Waiting for application startup.",
        "Application startup complete.",
        "Shutting down",
        "Waiting for application shutdown.",
        "Application shutdown complete.",
    ):
        assert uvicorn[message] == 1, message
    # Both listeners still say where they listen: the webhook (HTTPS) and the probes (HTTP).
    running = sorted(m.split("://")[0] for m in uvicorn if m.startswith("Uvicorn running on"))
    assert running == ["Uvicorn running on http", "Uvicorn running on https"]
