"""A client that gives up on a ``scratchpad`` call over ``/mcp`` of a real ``scratchpad serve``
interrupts its cell (variables kept), in both protocol eras: ``notifications/cancelled``
(2025-11-25) and a closed POST (2026-07-28), as a dropped remote-protocol stream does."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.server.test_mcp import run, texts
from tests.server_helpers import running_server

KEY = "mcp-cancel-key"
LONG = "import time\nfor _ in range(600):\n    time.sleep(0.1)"


async def pad_status(client: Client, pad: str) -> str:
    listed = texts(await client.call_tool("scratchpad", {"action": "list"}))
    line = next((line for line in listed.splitlines() if line.startswith(f"- {pad!r}:")), "")
    return line.split(":", 1)[1].split(",", 1)[0].strip() if line else ""


async def wait_status(client: Client, pad: str, status: str, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while (now := await pad_status(client, pad)) != status:
        assert time.monotonic() < deadline, f"pad {pad!r} is {now!r}, not {status!r}"
        await anyio.sleep(0.1)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_call_the_client_gives_up_on_interrupts_its_cell(tmp_path: Path, mode: str) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _process):
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client,
        ):
            assert not (await client.call_tool("scratchpad", run("p", "x = 41"))).is_error
            with anyio.move_on_after(60) as waited:  # the client's own deadline
                async with anyio.create_task_group() as calls:

                    async def long_call(scope: anyio.CancelScope) -> None:
                        with scope:
                            await client.call_tool("scratchpad", run("p", LONG))

                    giving_up = anyio.CancelScope()
                    calls.start_soon(long_call, giving_up)
                    await wait_status(client, "p", "busy", within_s=30)
                    giving_up.cancel()  # the client stops waiting (a timeout, a Stop)
            assert not waited.cancelled_caught
            await wait_status(client, "p", "idle", within_s=15)  # not the cell's 60 s
            after = await client.call_tool("scratchpad", run("p", "x + 1"))
            view = texts(await client.call_tool("scratchpad", {"action": "view", "name": "p"}))
    assert "[result]\n42" in texts(after)  # interrupted, not restarted: variables kept
    assert "KeyboardInterrupt" in view or "cancelled" in view.lower(), view
