"""A loopback TCP proxy for fault injection, run as its own process (stdlib only).

``python tests/harness/tcpproxy.py --listen PORT --backend HOST:PORT [--backend ...]``

- Each accepted connection goes to the next backend in round-robin order, bytes piped both ways
  unchanged (TLS stays end to end). No health checks and no retries: a backend that refuses the
  connection makes the proxy reset the client's connection, like a Service routing to a dead pod.
- ``SIGUSR1`` cuts every open connection (TCP reset on both sides): a lost watch, say.
- ``SIGUSR2`` cuts them too and then refuses (resets) new connections: a network partition.
- ``SIGHUP`` accepts connections again. ``SIGTERM`` stops the proxy.
- ``SIGURG`` holds every open connection: its bytes wait in the proxy (a watch whose events are
  late); connections opened later flow. ``SIGWINCH`` releases them, bytes in order.

Every event is one JSON line on stdout (``listening``, ``connect``, ``refused``, ``cut``,
``paused``, ``resumed``, ``held``, ``released``), so the test can wait for a control signal to have
taken effect.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import signal
import socket
import struct
import sys
from dataclasses import dataclass, field
from typing import Final

CONNECT_TIMEOUT: Final = 5.0
CHUNK: Final = 65536


def log(event: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST (linger 0), as a refused or broken connection looks to a client."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@dataclass
class Proxy:
    backends: list[tuple[str, int]]
    paused: bool = False
    live: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = field(default_factory=set)
    # Per connection: set while its bytes flow, cleared while it is held.
    flowing: dict[tuple[asyncio.StreamWriter, asyncio.StreamWriter], asyncio.Event] = field(
        default_factory=dict
    )
    controls: int = 0
    _turn: itertools.count[int] = field(default_factory=itertools.count)

    def cut(self) -> int:
        pairs = list(self.live)
        for client, upstream in pairs:
            reset(client)
            reset(upstream)
        self.live.clear()
        return len(pairs)

    def on_cut(self) -> None:
        self.controls += 1
        log("cut", connections=self.cut(), control=self.controls)

    def on_pause(self) -> None:
        self.controls += 1
        self.paused = True
        log("paused", connections=self.cut(), control=self.controls)

    def on_resume(self) -> None:
        self.controls += 1
        self.paused = False
        log("resumed", control=self.controls)

    def on_hold(self) -> None:
        self.controls += 1
        for gate in self.flowing.values():
            gate.clear()
        log("held", connections=len(self.flowing), control=self.controls)

    def on_release(self) -> None:
        self.controls += 1
        for gate in self.flowing.values():
            gate.set()
        log("released", connections=len(self.flowing), control=self.controls)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.paused:
            log("refused", backend=None, reason="paused")
            reset(writer)
            return
        host, port = self.backends[next(self._turn) % len(self.backends)]
        backend = f"{host}:{port}"
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                up_reader, up_writer = await asyncio.open_connection(host, port)
        except (OSError, TimeoutError) as error:
            log("refused", backend=backend, reason=type(error).__name__)
            reset(writer)
            return
        pair = (writer, up_writer)
        self.live.add(pair)
        gate = self.flowing[pair] = asyncio.Event()
        gate.set()
        log("connect", backend=backend)
        try:
            await asyncio.gather(pipe(reader, up_writer, gate), pipe(up_reader, writer, gate))
        finally:
            self.live.discard(pair)
            self.flowing.pop(pair, None)
            for end in pair:
                end.close()


async def pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, gate: asyncio.Event
) -> None:
    """Copy until EOF (then half-close the other side) or a reset (then reset it); each chunk
    waits while ``gate`` is clear."""
    try:
        while chunk := await reader.read(CHUNK):
            await gate.wait()
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof() and not writer.is_closing():
            writer.write_eof()
    except (ConnectionError, OSError):
        reset(writer)


async def serve(port: int, backends: list[tuple[str, int]]) -> None:
    proxy = Proxy(backends)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, proxy.on_cut)
    loop.add_signal_handler(signal.SIGUSR2, proxy.on_pause)
    loop.add_signal_handler(signal.SIGHUP, proxy.on_resume)
    loop.add_signal_handler(signal.SIGURG, proxy.on_hold)
    loop.add_signal_handler(signal.SIGWINCH, proxy.on_release)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", port, reuse_address=True)
    log("listening", port=port, backends=[f"{h}:{p}" for h, p in backends])
    async with server:
        await stop.wait()
        proxy.cut()


def parse_backend(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=int, required=True)
    parser.add_argument("--backend", type=parse_backend, action="append", required=True)
    args = parser.parse_args(argv)
    asyncio.run(serve(args.listen, args.backend))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
