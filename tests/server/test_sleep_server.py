"""Pads that sleep, over a real ``scratchpad serve``: an open feed keeps its pad awake; the
pad list, a pad's line and ``scratchpad ls`` show an asleep pad; ``/scratchpad/start`` (the
web UI's "Wake") wakes it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.test_pad_feed import Feed, run_cell
from tests.server_helpers import running_server

KEY = "sleep-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}
WITHIN_S = 60.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    env = {"SCRATCHPAD_SLEEP_AFTER_S": "1"}
    with running_server(tmp_path / "home", tmp_path, KEY, env) as (url, _):
        yield url


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(headers=HEADERS, timeout=WITHIN_S) as http:
        yield http


async def statuses(client: httpx.AsyncClient, server: str) -> dict[str, dict[str, Any]]:
    answer = await client.get(f"{server}/v1/pads")
    assert answer.status_code == 200, answer.text
    return {pad["name"]: pad for pad in answer.json()["pads"]}


async def until_status(client: httpx.AsyncClient, server: str, name: str, status: str) -> None:
    async with asyncio.timeout(WITHIN_S):
        while (await statuses(client, server))[name]["status"] != status:  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def test_an_open_feed_keeps_its_pad_awake_and_the_lists_show_it_asleep_after(
    server: str, client: httpx.AsyncClient
) -> None:
    assert (await run_cell(client, server, {"name": "seen", "code": "x = 1"}))["type"] == "cell"
    async with client.stream("GET", f"{server}/v1/pads/seen/events") as response:
        feed = Feed(response)
        assert (await feed.next("snapshot"))["pad"]["status"] == "idle"
        await run_cell(client, server, {"name": "other", "code": "y = 2"})
        await until_status(client, server, "other", "asleep")  # the sleeper ran meanwhile
        assert (await statuses(client, server))["seen"]["status"] == "idle"
    await until_status(client, server, "seen", "asleep")
    line = (await client.get(f"{server}/v1/pads/seen/info")).json()
    assert (line["status"], line["cells"], line["memory_bytes"]) == ("asleep", 1, None)
    assert time.time() - WITHIN_S < line["last_activity"] <= time.time()

    env = {
        **os.environ,
        "SCRATCHPAD_BACKEND": "remote",
        "SCRATCHPAD_REMOTE_URL": server,
        "SCRATCHPAD_REMOTE_API_KEY": KEY,
    }
    command = [sys.executable, "-m", "scratchpad.cli", "ls"]
    listed = await asyncio.to_thread(
        subprocess.run, command, env=env, capture_output=True, text=True, timeout=90
    )
    assert listed.returncode == 0, listed.stderr
    rows = [line.split("\t") for line in listed.stdout.splitlines()]
    assert [row[:3] for row in rows] == [
        ["other", "asleep", "1 cells"],
        ["seen", "asleep", "1 cells"],
    ]
    assert all(row[3] == "-" and row[4].startswith("active ") for row in rows)

    woken = await client.post(f"{server}/scratchpad/start", json={"name": "seen"})
    assert woken.status_code == 200, woken.text
    assert (await statuses(client, server))["seen"]["status"] == "idle"
    final = await run_cell(client, server, {"name": "seen", "code": "'x' in globals()"})
    assert final["cell"]["status"] == "ok" and "The kernel was asleep" in final["cell"]["logs"]
