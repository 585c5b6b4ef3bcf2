"""Upkeep while the server runs: the observation store's expired entries are deleted at start
and then every ``observation_gc_interval_s``, on a worker thread (the event loop never waits
on SQLite). A failed gc is logged and tried again next time; it never stops the server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from scratchpad.observations.store import ObservationStore

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def housekeeping(store: ObservationStore | None, interval_s: float) -> AsyncIterator[None]:
    """Collect ``store``'s garbage in the background for as long as the block runs."""
    if store is None:
        yield
        return
    task = asyncio.create_task(collect_garbage(store, interval_s), name="observation-gc")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def collect_garbage(store: ObservationStore, interval_s: float) -> None:
    """``store.gc()`` now, then every ``interval_s`` seconds, until cancelled."""
    while True:
        await gc_once(store, interval_s)
        await asyncio.sleep(interval_s)


async def gc_once(store: ObservationStore, interval_s: float) -> int | None:
    """One gc on a worker thread; how many entries went, or None when it failed (logged)."""
    try:
        removed = await asyncio.to_thread(store.gc)
    except Exception:
        log.exception(
            "deleting expired observations from %s failed; the server goes on and tries "
            "again in %gs (check that the file is writable and the disk not full)",
            store.path,
            interval_s,
        )
        return None
    if removed:
        log.info("deleted %d expired observation(s) from %s", removed, store.path)
    return removed
