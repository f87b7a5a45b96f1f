"""The serving process's heap: few malloc arenas, start-up objects frozen, reference cycles swept
and free memory given back on a timer."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Callable
from typing import Final

SWEEP_SECONDS: Final = 10.0
CLOSED_PER_SWEEP: Final = 32
MALLOC_ARENAS: Final = 1
_M_ARENA_MAX: Final = -8  # glibc <malloc.h>


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas; whether it took (False elsewhere, e.g. musl or macOS).

    glibc gives each thread that allocates its own arena, up to 8 per core, and memory freed in
    one is not reused by another. nicguard's threads (one per watch cache, the audit, its
    writer, the certificate controller, the event loop) all run under the GIL, so they gain
    nothing from arenas of their own, and one arena holds less memory. Call before the threads
    start.
    """
    mallopt = _libc_function("mallopt", (ctypes.c_int, ctypes.c_int))
    return mallopt is not None and bool(mallopt(_M_ARENA_MAX, arenas))


def release_free_memory() -> bool:
    """Give back to the system what malloc holds free (glibc's ``malloc_trim``); whether it could.

    Decoding leaves free chunks between live objects that glibc keeps resident; trimming hands
    them back in well under a millisecond.
    """
    trim = _libc_function("malloc_trim", (ctypes.c_size_t,))
    if trim is None:
        return False
    trim(0)
    return True


@functools.cache
def _libc_function(name: str, argtypes: tuple[type, ...]) -> Callable[..., int] | None:
    """The C library's ``name`` (returning int), or None where there is none (musl, macOS)."""
    library = ctypes.util.find_library("c")
    if library is None:
        return None
    try:
        function = getattr(ctypes.CDLL(library), name)
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = argtypes, ctypes.c_int
    return function  # type: ignore[no-any-return]


def freeze_startup() -> None:
    """Move everything built so far (modules, a file-mode state) out of the collector's reach.

    It lives as long as the process; full collections then stop scanning it on the request
    path, where they showed as p99 spikes.
    """
    gc.collect()
    release_free_memory()
    gc.freeze()


class ClosedConnections:
    """A full collection once every ``every`` closed connections, between the timer's sweeps.

    Each closed TLS connection leaves ~280 KiB in a reference cycle (``sweep_cycles``). A client
    that opens connections as fast as nicguard closes them (~130 a second, evicted by the cap
    and the body budget) left ~45 MiB of them waiting for the timer; every 32 closes, at most
    ~9 MiB waits, for about a millisecond of collection each time.
    """

    __slots__ = ("_count", "_every")

    def __init__(self, every: int = CLOSED_PER_SWEEP) -> None:
        self._every = every
        self._count = 0

    def closed(self) -> None:
        self._count += 1
        if self._count >= self._every:
            self._count = 0
            gc.collect()


async def sweep_cycles(every: float = SWEEP_SECONDS) -> None:
    """A full collection every ``every`` seconds, until cancelled.

    CPython starts collections by counts of objects, not bytes. A closed TLS connection leaves
    asyncio's SSL transport in a reference cycle of ~40 objects holding ~280 KiB of buffers, so
    memory grew by 4.5 MiB per 16 connections and was not collected (measured under wrk). With
    the start-up heap frozen, a full collection takes about a millisecond.
    """
    while True:
        await asyncio.sleep(every)
        gc.collect()
        # What a relist, an audit pass or a burst of connections left free goes back too.
        release_free_memory()
