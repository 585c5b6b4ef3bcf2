"""A running server garbage-collects the observation store: at start, then periodically, on a
worker thread; a failing gc is logged and the server goes on."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from scratchpad.config import Settings
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.app import create_app

KEY = "gc-key"
DEADLINE_S = 10.0
EXPIRED = 1e-9  # a ttl that is over by the time anyone looks


class WatchedStore(ObservationStore):
    """An observation store that records the threads its gc runs on, and can fail."""

    def __init__(self, settings: Settings, failures: int = 0) -> None:
        super().__init__(settings=settings)
        self.gc_threads: list[int] = []
        self.failures = failures

    def gc(self) -> int:
        self.gc_threads.append(threading.get_ident())
        if len(self.gc_threads) <= self.failures:
            raise RuntimeError("disk I/O error")
        return super().gc()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", observation_gc_interval_s=0.05)


@asynccontextmanager
async def serving(settings: Settings, store: ObservationStore) -> AsyncIterator[FastAPI]:
    """The app with its lifespan running, as under uvicorn."""
    app = create_app(ScratchpadManager(settings=settings), api_key=KEY, store=store)
    async with app.router.lifespan_context(app):
        yield app


async def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {DEADLINE_S}s: {what}")
        await asyncio.sleep(0.01)


async def test_expired_observations_go_at_start_and_then_periodically(settings: Settings) -> None:
    store = WatchedStore(settings)
    with store:
        store.put("old", turn_id="t", ttl_seconds=EXPIRED)
        kept = store.put("live", turn_id="t")
        async with serving(settings, store):
            await wait_for(lambda: [i.id for i in store.list_all()] == [kept], "gc at start")
            store.put("later", turn_id="t", ttl_seconds=EXPIRED)
            await wait_for(lambda: len(store.list_all()) == 1, "a periodic gc")
            loop_thread = threading.get_ident()
        assert len(store.gc_threads) >= 2
        assert loop_thread not in store.gc_threads  # never on the event loop
        assert not [t for t in asyncio.all_tasks() if t.get_name() == "observation-gc"]


async def test_a_failing_gc_is_logged_and_the_server_goes_on(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="scratchpad.server.housekeeping")
    store = WatchedStore(settings, failures=2)
    with store:
        store.put("old", turn_id="t", ttl_seconds=EXPIRED)
        async with serving(settings, store) as app:
            await wait_for(lambda: not store.list_all(), "a gc after two failures")
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
                assert (await http.get("/healthz")).json() == {"ok": True}
    failures = [r for r in caplog.records if "deleting expired observations" in r.getMessage()]
    assert len(failures) == 2 and "tries again in 0.05s" in failures[0].getMessage()
    assert failures[0].exc_info is not None  # the traceback is in the log
