"""Detached cells through the ``scratchpad`` tool's start, peek, wait and cancel actions,
driven by the official MCP client in-process (the pads are real kernels)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from scratchpad.cli.background import stop
from scratchpad.config import Settings
from scratchpad.isolation import cli_command
from tests.server.test_mcp import connected, run, texts


def gated(scratch: Path, name: str = "go") -> str:
    """A cell that prints, then runs until the test creates ``scratch/name``."""
    return (
        "import pathlib, time\n"
        "print('begun', flush=True)\n"
        f"while not pathlib.Path({str(scratch / name)!r}).exists():\n"
        "    time.sleep(0.05)\n"
        "'finished'"
    )


async def call(client: Client, action: str, pad: str, **fields: object) -> tuple[bool, str]:
    result = await client.call_tool("scratchpad", {"action": action, "name": pad, **fields})
    return result.is_error, texts(result)


async def peek_until(client: Client, pad: str, cell_id: str, text: str) -> str:
    """Peek until the answer holds ``text`` (20 s at most)."""
    deadline = time.monotonic() + 20
    while True:
        failed, answer = await call(client, "peek", pad, cell_id=cell_id)
        assert not failed, answer
        if text in answer:
            return answer
        assert time.monotonic() < deadline, answer
        await asyncio.sleep(0.05)


async def test_start_answers_at_once_and_peek_wait_and_cancel_follow_the_cell(
    settings: Settings, workspace: Path, scratch: Path
) -> None:
    async with connected(settings, workspace) as client:
        assert not (await client.call_tool("scratchpad", run("p", "x = 41"))).is_error
        began = time.monotonic()
        failed, started = await call(client, "start", "p", code=gated(scratch))
        answered_in = time.monotonic() - began
        assert not failed, started
        head = json.loads(started.splitlines()[0])
        cell_id = head["id"]
        assert head["status"] in ("queued", "running") and answered_in < 10, started
        assert "wait (or peek)" in started

        so_far = await peek_until(client, "p", cell_id, "begun")
        assert "is running" in so_far and "[stdout so far]\nbegun" in so_far, so_far

        began = time.monotonic()
        failed, waited = await call(client, "wait", "p", cell_id=cell_id, wait_s=0.5)
        assert not failed and "is running" in waited and time.monotonic() - began < 5, waited

        (scratch / "go").touch()
        failed, ended = await call(client, "wait", "p", cell_id=cell_id, wait_s=30)
        assert not failed and "'finished'" in ended and "begun" in ended, ended
        plain = await client.call_tool("scratchpad", run("p", "x + 1"))
        assert "[result]\n42" in texts(plain)  # the same kernel, variables kept

        failed, started = await call(client, "start", "p", code=gated(scratch, "never"))
        cell_id = json.loads(started.splitlines()[0])["id"]
        await peek_until(client, "p", cell_id, "begun")
        failed, cancelled = await call(client, "cancel", "p", cell_id=cell_id)
        assert not failed and f"Cancelled cell {cell_id!r}" in cancelled, cancelled
        failed, ended = await call(client, "wait", "p", cell_id=cell_id, wait_s=30)
        assert failed and "Cell cancelled (interrupted" in ended, ended


async def test_a_repeated_start_is_the_same_cell_and_other_code_is_refused(
    settings: Settings, workspace: Path
) -> None:
    code = "runs = globals().get('runs', 0) + 1\nruns"
    async with connected(settings, workspace) as client:
        first = await call(client, "start", "p", code=code, cell_id="once")
        again = await call(client, "start", "p", code=code, cell_id="once")
        failed, ended = await call(client, "wait", "p", cell_id="once", wait_s=30)
        counted = await client.call_tool("scratchpad", run("p", "runs"))
        other = await call(client, "start", "p", code="1 + 1", cell_id="once")
    assert not first[0] and not again[0]
    assert json.loads(first[1].splitlines()[0])["id"] == "once"
    assert json.loads(again[1].splitlines()[0])["id"] == "once"
    assert not failed and "[result]\n1" in ended, ended
    assert "[result]\n1" in texts(counted)  # it ran once
    assert other[0] and "already names a cell with other code" in other[1], other[1]
    assert "give this cell a new id" in other[1]


async def test_bad_detached_cell_calls_say_what_to_do(settings: Settings, workspace: Path) -> None:
    async with connected(settings, workspace) as client:
        nameless = await client.call_tool("scratchpad", {"action": "start", "code": "1"})
        no_pad = await call(client, "peek", "nowhere", cell_id="c1")
        assert not (await client.call_tool("scratchpad", run("p", "1"))).is_error
        no_id = await call(client, "peek", "p")
        unknown = await call(client, "wait", "p", cell_id="c404")
        bad_wait = await call(client, "wait", "p", cell_id="c1", wait_s=-1)
        bad_id = await call(client, "peek", "p", cell_id="../x")
        empty = await call(client, "start", "p", code="  ")
    assert nameless.is_error and "missing required field 'name'" in texts(nameless)
    assert no_pad[0] and "no pad named 'nowhere'" in no_pad[1], no_pad[1]
    assert no_id[0] and "missing required field 'cell_id'" in no_id[1], no_id[1]
    assert "the one start answered" in no_id[1]
    assert unknown[0] and "has no cell 'c404'" in unknown[1], unknown[1]
    assert bad_wait[0] and "wait_s must be a number of seconds" in bad_wait[1], bad_wait[1]
    assert bad_id[0] and "use 1-64 letters, digits" in bad_id[1], bad_id[1]
    assert empty[0] and "No code received" in empty[1], empty[1]


async def test_detached_cells_over_stdio_live_on_the_pad_server(tmp_path: Path) -> None:
    """``scratchpad mcp`` drives the pads of its home's server: start is that server's
    submit, so its rules hold there too."""
    settings = Settings(home=tmp_path / "home")
    env = {**os.environ, "SCRATCHPAD_HOME": str(settings.home)}
    command = cli_command("mcp")
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=tmp_path)
    code = "import time\ntime.sleep(1)\nprint('hi')\n6 * 7"
    try:
        async with Client(params) as client:
            failed, started = await call(client, "start", "p", code=code, cell_id="far")
            assert not failed, started
            failed, ended = await call(client, "wait", "p", cell_id="far", wait_s=30)
            peeked = await call(client, "peek", "p", cell_id="far")
            other = await call(client, "start", "p", code="1", cell_id="far")
    finally:
        stop(settings)
    assert json.loads(started.splitlines()[0])["id"] == "far"
    assert not failed and "hi" in ended and "[result]\n42" in ended, ended
    assert peeked == (False, ended)
    assert other[0] and "already names a cell with other code" in other[1], other[1]
