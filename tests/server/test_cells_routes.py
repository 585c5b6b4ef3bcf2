"""The detached-cell routes in-process: the long poll's bound, a submit still being accepted,
bad resume points."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from scratchpad.runtime.cell import Cell
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.watch import PadWatch
from scratchpad.server import cells_routes
from scratchpad.server.app import create_app
from scratchpad.wire import wire

KEY = "test-key"


@pytest.fixture
async def client(manager: ScratchpadManager) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(manager, api_key=KEY))
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as http:
        yield http


async def test_a_long_poll_waits_at_most_the_bound_then_says_how_the_cell_stands(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cells_routes, "WAIT_MAX_S", 0.3)
    code = "import time\nprint('busy', flush=True)\ntime.sleep(30)"
    submitted = await client.post("/v1/pads/p/cells", json={"code": code, "id": "slow"})
    assert submitted.status_code == 202, submitted.text
    began = time.monotonic()
    waited = await client.post("/v1/pads/p/cells/slow/wait", params={"timeout": 999})
    assert time.monotonic() - began < 5
    assert waited.status_code == 200 and waited.json()["status"] in ("queued", "running")
    assert (await client.post("/v1/pads/p/cells/slow/cancel")).json()["cancelled"] is True
    ended = await client.post("/v1/pads/p/cells/slow/wait", params={"timeout": 20})
    assert ended.json()["status"] == "cancelled"
    negative = await client.post("/v1/pads/p/cells/slow/wait", params={"timeout": -1})
    assert negative.status_code == 422


async def test_a_submit_of_an_id_still_being_accepted_is_told_to_ask_again(
    client: httpx.AsyncClient, manager: ScratchpadManager
) -> None:
    manager.accepting[("p", "early")] = "a hash"  # its pad is still starting
    answer = await client.post("/v1/pads/p/cells", json={"code": "1", "id": "early"})
    assert answer.status_code == 409
    assert answer.json()["type"] == "CellAcceptingError"
    assert "ask again" in answer.json()["error"]


async def test_a_resume_point_of_another_cell_is_refused(client: httpx.AsyncClient) -> None:
    assert (await client.post("/v1/pads/p/cells", json={"code": "1", "id": "a"})).is_success
    answer = await client.get("/v1/pads/p/cells/a/events", headers={"Last-Event-ID": "other:3"})
    assert answer.status_code == 400 and "Last-Event-ID" in answer.json()["error"]
    missing = await client.get("/v1/pads/p/cells/nope/events")
    assert missing.status_code == 404


async def test_an_open_cell_stream_counts_as_attached_until_it_ends() -> None:
    watch = PadWatch("p")
    cell = Cell(code="1", id="c")
    watch.queued(cell)
    closed = asyncio.Event()
    stream = cells_routes._events("p", watch, "c", 0, None, closed)
    assert wire(await anext(stream))["type"] == "queued"
    assert watch.attached  # a sleeper must leave this pad alone
    waiting = asyncio.ensure_future(anext(stream))
    closed.set()  # the client went away
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiting, 5)
    assert not watch.attached


async def test_a_negative_estimate_is_refused_and_an_unknown_pad_has_no_cell_list(
    client: httpx.AsyncClient,
) -> None:
    refused = await client.post("/v1/pads/p/cells", json={"code": "1", "estimated_seconds": -5})
    assert refused.status_code == 400 and "estimated_seconds" in refused.json()["error"]
    missing = await client.get("/v1/pads/nopad/cells")
    assert missing.status_code == 404 and "no pad named 'nopad'" in missing.json()["error"]


async def test_a_cell_followed_from_elsewhere_stands_running_until_it_ends(
    client: httpx.AsyncClient, manager: ScratchpadManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cell another process runs (a Ray pad's, started by another server or by this one
    before a restart) is in this server's journals once followed, though its watch never
    queued it: it stands running, not 'no such cell'."""

    async def follow(name: str, cell_id: str) -> None:  # what a Ray pad's live actor gives
        journal = manager.watch(name).journals.open(cell_id)
        journal.gen, journal.ran = 1, True

    monkeypatch.setattr(manager, "follow", follow)
    monkeypatch.setattr(cells_routes, "WAIT_MAX_S", 0.1)
    standing = await client.get("/v1/pads/p/cells/elsewhere")
    assert standing.status_code == 200, standing.text
    assert standing.json()["status"] == "running" and standing.json()["id"] == "elsewhere"
    waited = await client.post("/v1/pads/p/cells/elsewhere/wait", params={"timeout": 1})
    assert waited.status_code == 200 and waited.json()["status"] == "running"
