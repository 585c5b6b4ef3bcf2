"""A pad's live feed over a real ``scratchpad serve`` (httpx streaming), the pad list and
info, slices of long fields, bad input."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.app import create_app
from tests.server_helpers import running_server

KEY = "feed-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}
WITHIN_S = 60.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _):
        yield url


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(headers=HEADERS, timeout=WITHIN_S) as http:
        yield http


class Feed:
    """The frames of one open feed, read with a deadline; ``ids`` as the server sent them."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.aiter_lines()
        self.ids: list[int] = []

    async def next(self, kind: str | None = None) -> dict[str, Any]:
        async with asyncio.timeout(WITHIN_S):
            while True:
                frame = await self.frame()
                assert frame is not None, "the feed ended"
                if kind is None or frame["type"] == kind:
                    return frame

    async def frame(self) -> dict[str, Any] | None:
        """The next frame, or None when the stream ended."""
        data = None
        async for line in self.lines:
            if line.startswith("id: "):
                self.ids.append(int(line[4:]))
            elif line.startswith("data: "):
                data = json.loads(line[6:])
            elif line == "" and data is not None:
                return dict(data)
        return None

    async def until_cell(self) -> list[dict[str, Any]]:
        seen = [await self.next()]
        while seen[-1]["type"] != "cell":
            seen.append(await self.next())
        return seen


async def run_cell(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """Run a cell as another client would (the remote-backend protocol); its final frame."""
    response = await client.post(f"{url}/scratchpad/execute-stream", json=body)
    assert response.status_code == 200, response.text
    last = response.text.strip().split("\n\n")[-1]
    return dict(json.loads(last.removeprefix("data: ")))


async def test_a_feed_shows_a_cell_another_client_runs(
    server: str, client: httpx.AsyncClient
) -> None:
    async with client.stream("GET", f"{server}/v1/pads/data%2Fnew/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        feed = Feed(response)
        snapshot = await feed.next()
        assert snapshot["type"] == "snapshot" and snapshot["pad"]["name"] == "data/new"
        assert snapshot["pad"]["status"] == "new"
        assert (snapshot["running"], snapshot["queued"], snapshot["cells"]) == (None, [], 0)
        body = {"name": "data/new", "code": "print('hi')\ndisplay('d')", "description": "other"}
        final = await run_cell(client, server, body)
        seen = await feed.until_cell()
    assert [frame["type"] for frame in seen] == [
        "status", "queued", "started", "output", "display", "cell",
    ]  # fmt: skip
    cell_id = final["cell"]["id"]
    brief = {"id": cell_id, "number": 1, "code": body["code"], "description": "other"}
    assert seen[1]["cell"] == brief
    assert seen[2]["id"] == cell_id and seen[2]["number"] == 1
    assert seen[3]["text"] == "hi\n" and seen[3]["id"] == cell_id
    assert seen[-1]["cell"] == final["cell"] and final["cell"]["number"] == 1
    assert feed.ids == list(range(len(feed.ids))) and len(feed.ids) == 7


async def test_every_json_form_of_a_cell_carries_its_number(
    server: str, client: httpx.AsyncClient
) -> None:
    frames = [await run_cell(client, server, {"name": "n", "code": f"{i} / 0"}) for i in range(3)]
    assert [frame["cell"]["number"] for frame in frames] == [1, 2, 3]
    assert '"<cell 3>"' in frames[2]["cell"]["error"]
    listing = (await client.get(f"{server}/v1/pads/n")).json()
    assert [cell["number"] for cell in listing["cells"]] == [1, 2, 3]
    one = (await client.get(f"{server}/v1/pads/n/cells/{frames[1]['cell']['id']}")).json()
    assert one["number"] == 2
    notebook = (await client.get(f"{server}/v1/pads/n/notebook")).json()
    assert [cell["execution_count"] for cell in notebook["cells"]] == [1, 2, 3]
    await client.post(f"{server}/scratchpad/reset", json={"name": "n"})
    assert (await run_cell(client, server, {"name": "n", "code": "1"}))["cell"]["number"] == 1


async def test_a_feed_opened_mid_cell_starts_from_the_output_so_far(
    server: str, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    flag = tmp_path / "home" / "workspaces" / "mid" / "go"  # in the pad's own directory
    code = (
        "import os, time\nprint('first', flush=True)\nprogress('waiting')\n"
        f"while not os.path.exists({str(flag)!r}):\n    time.sleep(0.01)\nprint('second')"
    )
    running = asyncio.create_task(run_cell(client, server, {"name": "mid", "code": code}))
    async with asyncio.timeout(WITHIN_S):
        while True:  # reconnect until the snapshot shows the cell waiting
            async with client.stream("GET", f"{server}/v1/pads/mid/events") as response:
                feed = Feed(response)
                snapshot = await feed.next()
                now = snapshot["running"]
                if now is not None and now["progress"] == "waiting":
                    assert now["stdout"] == "first\n" and snapshot["pad"]["status"] == "busy"
                    assert now["number"] == 1
                    assert snapshot["pad"]["busy_since"] == now["started_at"]
                    flag.touch()
                    rest = await feed.until_cell()
                    break
            await asyncio.sleep(0.05)
    assert [(frame["type"], frame.get("text")) for frame in rest] == [
        ("output", "second\n"), ("cell", None),
    ]  # fmt: skip
    assert rest[-1]["cell"]["stdout"] == "first\nsecond\n"
    assert (await running)["cell"]["id"] == now["id"]


async def test_a_feed_client_that_never_reads_overflows_and_never_holds_a_cell_up(
    server: str, client: httpx.AsyncClient
) -> None:
    await run_cell(client, server, {"name": "flood", "code": "1"})
    async with client.stream("GET", f"{server}/v1/pads/flood/events") as stuck:
        code = "print('x' * 5_000_000)"
        final = await run_cell(client, server, {"name": "flood", "code": code})
        assert final["cell"]["status"] == "ok"  # done while the feed client read nothing
        feed = Feed(stuck)
        frames = []
        async with asyncio.timeout(WITHIN_S):
            while (frame := await feed.frame()) is not None:
                frames.append(frame)
    assert frames[0]["type"] == "snapshot"
    assert frames[-1] == {"type": "overflow"}  # then the stream ended
    assert "cell" not in [frame["type"] for frame in frames]
    info = (await client.get(f"{server}/v1/pads/flood/info")).json()
    assert info["status"] == "idle" and info["cells"] == 2


async def test_a_feed_reports_reset_removal_and_a_kernel_death(
    server: str, client: httpx.AsyncClient
) -> None:
    await run_cell(client, server, {"name": "life", "code": "x = 1"})
    async with client.stream("GET", f"{server}/v1/pads/life/events") as response:
        feed = Feed(response)
        assert (await feed.next())["cells"] == 1
        await run_cell(client, server, {"name": "life", "code": "import os\nos._exit(3)"})
        dead = await feed.next("status")
        assert (dead["pad"]["status"], dead["pad"]["cause"]) == ("dead", "exited with code 3")
        listed = (await client.get(f"{server}/v1/pads")).json()["pads"]
        assert [(p["name"], p["status"], p["cause"]) for p in listed] == [
            ("life", "dead", "exited with code 3")
        ]
        assert (await client.post(f"{server}/scratchpad/reset", json={"name": "life"})).is_success
        reset = await feed.next("status")
        assert (reset["pad"]["status"], reset["pad"]["cells"]) == ("idle", 0)
        assert reset["gen"] > dead["gen"] >= 1  # a new kernel: the next generation
        assert (await client.post(f"{server}/scratchpad/cleanup", json={"name": "life"})).is_success
        statuses = [(await feed.next("status"))["pad"]["status"] for _ in range(2)]
        assert statuses == ["stopped", "removed"]


async def test_the_pad_list_and_info_while_a_cell_sleeps(
    server: str, client: httpx.AsyncClient
) -> None:
    await run_cell(client, server, {"name": "nap", "code": "x = 1"})
    body = {"name": "nap", "code": "import time\ntime.sleep(60)", "description": "sleeping"}
    sleeping = asyncio.create_task(run_cell(client, server, body))
    async with asyncio.timeout(WITHIN_S):
        while True:  # polling the server: there is no event to wait on here
            info = (await client.get(f"{server}/v1/pads/nap/info")).json()
            if info["running"] is not None:
                break
            await asyncio.sleep(0.02)
    assert info["status"] == "busy" and info["busy_since"] > 0
    assert info["running"]["description"] == "sleeping" and info["memory_bytes"] > 1_000_000
    [listed] = (await client.get(f"{server}/v1/pads")).json()["pads"]
    assert {k: listed[k] for k in ("name", "status", "cells", "queued")} == {
        "name": "nap", "status": "busy", "cells": 1, "queued": 0,
    }  # fmt: skip
    assert (await client.post(f"{server}/scratchpad/cancel", json={"name": "nap"})).is_success
    assert (await sleeping)["cell"]["status"] == "cancelled"
    assert (await client.post(f"{server}/scratchpad/close", json={"name": "nap"})).is_success
    stopped = (await client.get(f"{server}/v1/pads/nap/info")).json()
    assert (stopped["status"], stopped["memory_bytes"], stopped["busy_since"]) == (
        "stopped", None, None,
    )  # fmt: skip
    assert stopped["cells"] == 2 and stopped["last_activity"] >= info["busy_since"]


# -- in-process: slices and bad input ----------------------------------------------------------
@pytest.fixture
async def app_client(manager: ScratchpadManager) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(manager, api_key=KEY))
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=HEADERS) as c:
        yield c


async def test_long_fields_are_read_in_slices(
    manager: ScratchpadManager, app_client: httpx.AsyncClient
) -> None:
    pad = await manager.get_or_create("big")
    cell = await pad.execute("print('é' * 100_000 + 'end')\nraise ValueError('bad')")
    where = f"/v1/pads/big/cells/{cell.id}/text"
    first = (await app_client.get(where, params={"offset": 0, "length": 10})).json()
    assert first == {
        "field": "stdout",
        "offset": 0,
        "length": 10,
        "total": 100_004,
        "text": "é" * 10,
    }
    tail = (await app_client.get(where, params={"offset": 100_000})).json()
    assert (tail["text"], tail["length"]) == ("end\n", 4)
    error = (await app_client.get(where, params={"field": "error"})).json()
    assert "ValueError: bad" in error["text"] and error["total"] == len(cell.error or "")
    capped = (await app_client.get(where, params={"length": 10**9})).json()
    assert capped["length"] == 100_004  # under the 1 MiB cap: all of it
    result = (await app_client.get(where, params={"field": "result"})).json()
    assert (result["text"], result["total"]) == ("", 0)


async def test_bad_requests_say_what_to_send(
    manager: ScratchpadManager, app_client: httpx.AsyncClient
) -> None:
    pad = await manager.get_or_create("p")
    cell = await pad.execute("1")
    bad_field = await app_client.get(f"/v1/pads/p/cells/{cell.id}/text", params={"field": "code"})
    assert bad_field.status_code == 400
    assert bad_field.json()["type"] == "InvalidInputError"
    assert "stdout, stderr, error, result, logs" in bad_field.json()["error"]
    negative = await app_client.get(f"/v1/pads/p/cells/{cell.id}/text", params={"offset": -1})
    assert negative.status_code == 400
    not_a_number = await app_client.get(f"/v1/pads/p/cells/{cell.id}/text?length=lots")
    assert not_a_number.status_code == 422
    unknown_cell = await app_client.get("/v1/pads/p/cells/nope/text")
    assert (unknown_cell.status_code, unknown_cell.json()["type"]) == (404, "PadNotFoundError")
    unknown_pad = await app_client.get("/v1/pads/ghost/info")
    assert (unknown_pad.status_code, unknown_pad.json()["type"]) == (404, "PadNotFoundError")
    bad_name = await app_client.get("/v1/pads/a%01b/events")
    assert (bad_name.status_code, bad_name.json()["type"]) == (400, "InvalidPadNameError")
    too_long = await app_client.get(f"/v1/pads/{'n' * 200}/events")
    assert too_long.status_code == 400
    unauthorized = await app_client.get("/v1/pads/p/events", headers={"Authorization": "x"})
    assert unauthorized.status_code == 401


async def test_a_feed_client_that_goes_away_lets_go_of_its_subscription(
    manager: ScratchpadManager,
) -> None:
    app = create_app(manager, api_key=KEY)
    gone = asyncio.Event()
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    snapshot = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message["body"].startswith(b"id: 0\n"):
            snapshot.set()

    path = "/v1/pads/left/events"
    scope = {
        "type": "http", "method": "GET", "path": path, "raw_path": path.encode(),
        "query_string": b"", "headers": [(b"authorization", f"Bearer {KEY}".encode())],
        "http_version": "1.1", "scheme": "http", "root_path": "",
        "server": ("test", 80), "client": ("test", 1),
    }  # fmt: skip
    serving = asyncio.create_task(app(scope, receive, send))  # type: ignore[arg-type]
    async with asyncio.timeout(WITHIN_S):
        await snapshot.wait()
        assert manager.watch("left").watched
        gone.set()
        await serving
        while manager.watch("left").watched:  # noqa: ASYNC110 - the producer ends on its own
            await asyncio.sleep(0.01)
