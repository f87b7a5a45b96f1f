"""The serving heap (app.heap): frozen start-up objects, cycles swept on a timer."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from app.heap import (
    ClosedConnections,
    freeze_startup,
    limit_malloc_arenas,
    release_free_memory,
    sweep_cycles,
)


class _Node:
    """An object in a reference cycle: only a collection frees it."""

    def __init__(self) -> None:
        self.itself = self


@pytest.fixture
def no_automatic_collections() -> Iterator[None]:
    """Only explicit collections run, so a freed cycle proves the sweep freed it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@pytest.mark.usefixtures("no_automatic_collections")
def test_a_sweep_frees_reference_cycles_that_automatic_collection_left() -> None:
    gone = asyncio.Event()
    node = _Node()
    weakref.finalize(node, gone.set)
    del node

    async def sweep_until_freed() -> None:
        sweeper = asyncio.create_task(sweep_cycles(every=0.01))
        try:
            await asyncio.wait_for(gone.wait(), timeout=10)
        finally:
            sweeper.cancel()

    assert not gone.is_set()
    asyncio.run(sweep_until_freed())
    assert gone.is_set()


@pytest.mark.usefixtures("no_automatic_collections")
def test_start_up_garbage_is_freed_before_the_rest_is_frozen() -> None:
    freed: list[bool] = []
    node = _Node()
    weakref.finalize(node, freed.append, True)
    del node
    try:
        freeze_startup()
        assert freed == [True]  # collected, not kept frozen for the life of the process
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_malloc_arenas_are_capped_on_glibc() -> None:
    # mallopt returns 1 on success; glibc is what the image (python:3.13-slim) and CI run. (The
    # test process keeps the cap: harmless, its threads run under the GIL too.)
    assert limit_malloc_arenas() is True


def _rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def test_free_memory_between_live_objects_goes_back_to_the_system() -> None:
    # 64 MiB of 4 KiB buffers (malloc's heap, not pymalloc's arenas), one in 16 kept: glibc keeps
    # the pages between them resident until malloc_trim gives them back.
    buffers = [bytearray(4096) for _ in range(16_384)]
    for buffer in buffers:
        buffer[::512] = b"x" * 8  # touch every page
    kept = buffers[::16]
    del buffers
    before = _rss_kib()
    assert release_free_memory() is True
    after = _rss_kib()
    assert before - after > 32 * 1024, (before, after)
    assert len(kept) == 1024


@pytest.mark.usefixtures("no_automatic_collections")
def test_every_so_many_closed_connections_sweep_the_cycles_they_left() -> None:
    closed = ClosedConnections(every=3)
    node = _Node()
    freed: list[bool] = []
    weakref.finalize(node, freed.append, True)
    del node
    closed.closed()
    closed.closed()
    assert not freed
    closed.closed()
    assert freed == [True]
