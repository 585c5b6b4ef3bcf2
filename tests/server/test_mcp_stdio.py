"""``scratchpad mcp`` (stdio) is a client of the pad server: a new stdio process answers every
action from the server's state, for pads other clients made and cells they ran; a call its
client gives up on interrupts its cell there."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from scratchpad.isolation import cli_command
from scratchpad.runtime.remote import RemoteRuntime
from tests.server.test_mcp import run, texts
from tests.server_helpers import running_server

KEY = "mcp-stdio-key"
LONG = "import time\nfor _ in range(600):\n    time.sleep(0.1)"


async def wait_status(server: RemoteRuntime, name: str, status: str = "busy") -> None:
    deadline = time.monotonic() + 30
    while not any(p["name"] == name and p["status"] == status for p in await server.server_pads()):
        assert time.monotonic() < deadline, f"pad {name!r} never became {status}"
        await asyncio.sleep(0.1)


async def test_a_new_stdio_process_answers_from_the_servers_state(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with running_server(home, tmp_path, KEY) as (url, _process):
        other = RemoteRuntime("a", url=url, api_key=KEY)  # another client made these pads
        busy = RemoteRuntime("b", url=url, api_key=KEY)
        for code in ("x = 1", "y = 2", "x + y"):
            assert (await other.execute(code)).ok
        running = asyncio.create_task(busy.execute(LONG))
        await wait_status(busy, "b")

        env = {**os.environ, "SCRATCHPAD_HOME": str(home), "SCRATCHPAD_API_KEY": KEY}
        command = cli_command("mcp")
        params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=tmp_path)
        async with Client(params) as client:

            async def call(**arguments: object) -> tuple[bool, str]:
                answer = await client.call_tool("scratchpad", arguments)
                return bool(answer.is_error), texts(answer)

            viewed = await call(action="view", name="a")
            dumped = await call(action="dump", name="a")
            listed = await call(action="list")
            cancelled = await call(action="cancel", name="b")
            failed_install = await call(action="install", name="a", packages=["nosuchpkg-xyz"])
            not_run = await call(**run("a", "ran = True"), packages=["nosuchpkg-xyz"])
            checked = await call(**run("a", "'ran' in globals()"))
            removed = await call(action="remove", name="a")
            after = await call(action="list")

            async with anyio.create_task_group() as calls:  # a call the client gives up on
                giving_up = anyio.CancelScope()

                async def long_call() -> None:
                    with giving_up:
                        await client.call_tool("scratchpad", run("c", LONG))

                calls.start_soon(long_call)
                await wait_status(busy, "c")
                giving_up.cancel()
            await wait_status(busy, "c", "idle")  # interrupted, not left to run 60 s
        ended = await asyncio.wait_for(running, 30)
        await other.detach()
        await busy.detach()

    assert not viewed[0] and "x + y" in viewed[1] and "no cells" not in viewed[1], viewed
    assert not dumped[0] and "y = 2" in dumped[1], dumped
    assert not listed[0] and "- 'a': idle, 3 cell(s)" in listed[1], listed
    assert "- 'b': busy" in listed[1], listed
    assert not cancelled[0] and "Cancelled the running cell of pad 'b'" in cancelled[1]
    assert ended.status == "cancelled"
    assert failed_install[0] and "nosuchpkg-xyz" in failed_install[1], failed_install
    assert not_run[0] and "nosuchpkg-xyz" in not_run[1], not_run
    assert checked == (False, "[result]\nFalse")  # the cell after a failed install never ran
    assert not removed[0] and "removed" in removed[1], removed
    assert "'a'" not in after[1] and "- 'b': idle" in after[1], after
