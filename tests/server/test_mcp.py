"""The MCP server, driven by the official MCP Python client: in-process, over stdio
(``scratchpad mcp``) and over streamable HTTP at ``/mcp`` of a real ``scratchpad serve``."""

from __future__ import annotations

import base64
import itertools
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from scratchpad.cli.background import stop
from scratchpad.config import Settings
from scratchpad.isolation import cli_command
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.remote import RemoteRuntime
from scratchpad.server.auth import resolve_api_key
from scratchpad.server.mcp_server import create_mcp_server
from scratchpad.server.state import running_record
from scratchpad.tools.observation_tool import INPUT_SCHEMA as READ_SCHEMA
from scratchpad.tools.scratchpad_tool import INPUT_SCHEMA as PAD_SCHEMA
from tests.images import PNG
from tests.server_helpers import running_server

KEY = "mcp-key"
SHOW_IMAGE = (
    "class Picture:\n"
    "    def _repr_png_(self):\n"
    f"        return {PNG!r}\n"
    "display(Picture())\n"
    "'shown'"
)


def run(pad: str, code: str) -> dict[str, object]:
    return {"action": "exec", "name": pad, "code": code}


def texts(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def keeps_state_reports_errors_and_shows_images(client: Client) -> None:
    """The acceptance path every transport must pass."""
    listed = await client.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert tools["scratchpad"].input_schema == PAD_SCHEMA
    first = await client.call_tool("scratchpad", run("p", "x = 41"))
    assert not first.is_error, texts(first)
    second = await client.call_tool("scratchpad", run("p", "x + 1"))
    assert not second.is_error and "[result]\n42" in texts(second)
    failed = await client.call_tool("scratchpad", run("p", "1 / 0"))
    assert failed.is_error
    assert "ZeroDivisionError" in texts(failed)
    picture = await client.call_tool("scratchpad", run("p", SHOW_IMAGE))
    images = [c for c in picture.content if isinstance(c, types.ImageContent)]
    assert [(i.mime_type, base64.b64decode(i.data)) for i in images] == [("image/png", PNG)]
    assert "'shown'" in texts(picture)
    odd = await client.call_tool("scratchpad", run("p", "raise ValueError(chr(0xd800))"))
    assert odd.is_error and "ValueError: \ufffd" in texts(odd)  # valid JSON on every transport
    limited = {**run("p", "import time\ntime.sleep(30)"), "timeout_s": 0.5}
    quick = await client.call_tool("scratchpad", limited)
    assert "Cell timed out after 0.5s" in texts(quick)


@asynccontextmanager
async def connected(settings: Settings, workspace: Path) -> AsyncIterator[Client]:
    """An in-process client (entered in the test's own task, as anyio requires)."""
    with ObservationStore(workspace / "obs.db", settings=settings) as store:
        async with (
            ScratchpadManager(workspace=workspace, settings=settings) as manager,
            Client(create_mcp_server(manager, store)) as client,
        ):
            yield client


async def test_in_process_client_keeps_state_reports_errors_and_shows_images(
    settings: Settings, workspace: Path
) -> None:
    async with connected(settings, workspace) as client:
        await keeps_state_reports_errors_and_shows_images(client)
        listed = await client.list_tools()
    assert [t.name for t in listed.tools] == ["scratchpad", "read_observation"]
    assert listed.tools[1].input_schema == READ_SCHEMA


async def test_long_cells_send_progress_notifications(settings: Settings, workspace: Path) -> None:
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    code = "for i in range(20):\n    print(f'line {i}')\n    progress(f'step {i}')\n'done'"
    async with connected(settings, workspace) as client:
        result = await client.call_tool("scratchpad", run("p", code), progress_callback=on_progress)
    assert not result.is_error, texts(result)
    made = [message for i in range(20) for message in (f"line {i}", f"step {i}")]
    assert seen == list(enumerate(made, start=1))  # stdout and progress() in their order


async def test_a_quiet_long_cell_sends_progress_at_least_every_10_s(
    settings: Settings, workspace: Path
) -> None:
    """TypeScript clients reset their request timeout on progress: a quiet cell must not
    look like a dead server."""
    times: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        times.append(time.monotonic())

    async with connected(settings, workspace) as client:
        listed = await client.list_tools()
        assert not (await client.call_tool("scratchpad", run("p", "1"))).is_error
        began = time.monotonic()
        quiet = run("p", "import time\ntime.sleep(12)\n'done'")
        result = await client.call_tool("scratchpad", quiet, progress_callback=on_progress)
        ended = time.monotonic()
    assert not result.is_error and "'done'" in texts(result)
    marks = [began, *times, ended]
    assert len(times) >= 2 and max(b - a for a, b in itertools.pairwise(marks)) < 10, marks
    description = next(t.description for t in listed.tools if t.name == "scratchpad") or ""
    assert "clients need a timeout longer than their longest cell" in description


async def test_the_model_reads_what_a_cell_displayed(settings: Settings, workspace: Path) -> None:
    code = "display('x')\nclass Notes:\n    def _repr_markdown_(self):\n        return '# notes'\n"
    async with connected(settings, workspace) as client:
        shown = await client.call_tool("scratchpad", run("p", code + "display(Notes())"))
        picture = await client.call_tool("scratchpad", run("p", SHOW_IMAGE))
    assert texts(shown) == "[display]\n'x'\n# notes"
    assert texts(picture) == "[display]\n[image (image/png), attached]\n\n[result]\n'shown'"


async def test_bad_input_and_unknown_tools_are_error_results_that_say_what_to_do(
    settings: Settings, workspace: Path
) -> None:
    async with connected(settings, workspace) as client:
        missing = await client.call_tool("scratchpad", {"action": "exec"})
        bad_name = await client.call_tool("scratchpad", run("bad\nname", "1"))
        empty = await client.call_tool("scratchpad", run("p", "   "))
        unknown = await client.call_tool("nope", {})
    assert missing.is_error and "missing required field 'name'" in texts(missing)
    assert bad_name.is_error and "pad name" in texts(bad_name).lower()
    assert empty.is_error and "No code received" in texts(empty)
    assert unknown.is_error and "Available tools: scratchpad, read_observation" in texts(unknown)


async def test_a_meaningless_number_of_seconds_is_refused_before_a_pad_starts(
    settings: Settings, workspace: Path
) -> None:
    estimate = "estimated_execution_time_seconds must be a number of seconds >= 0"
    async with connected(settings, workspace) as client:
        cases: list[tuple[dict[str, float], str]] = [
            ({"timeout_s": -2.5}, "timeout_s must be a number of seconds > 0, not -2.5"),
            ({"estimated_execution_time_seconds": -1}, f"{estimate} (0: no estimate), not -1"),
        ]  # (JSON has no NaN or infinity: the tool's own test has those)
        for given, words in cases:
            refused = await client.call_tool("scratchpad", {**run("p", "1"), **given})
            assert refused.is_error and words in texts(refused), texts(refused)
    assert not (settings.home / "pads").exists()  # no pad was made for it


async def test_large_output_is_saved_and_read_back_with_read_observation(
    settings: Settings, workspace: Path
) -> None:
    code = "for i in range(3000):\n    print(f'line {i}')"
    async with connected(settings, workspace) as client:
        shown = await client.call_tool("scratchpad", run("p", code))
        text = texts(shown)
        assert "large output saved as observation" in text
        observation_id = text.split("observation ", 1)[1].split(":", 1)[0]
        read = await client.call_tool(
            "read_observation",
            {"observation_id": observation_id, "mode": "grep", "pattern": "line 2999$"},
        )
    assert not read.is_error and "line 2999" in texts(read)


async def test_stdio_transport_uses_the_pads_of_the_home_server(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    env = {**os.environ, "SCRATCHPAD_HOME": str(settings.home)}
    command = cli_command("mcp")
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=tmp_path)
    try:
        async with Client(params) as client:
            await keeps_state_reports_errors_and_shows_images(client)
        record = running_record(settings)
        assert record is not None  # started in the background, still running
        pad = RemoteRuntime("p", url=record.url, api_key=resolve_api_key(settings))
        assert (await pad.execute("x")).result == "41"  # the MCP session's variable
        await pad.detach()
    finally:
        stop(settings)


async def test_streamable_http_transport_behind_the_api_key(tmp_path: Path) -> None:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _process):
        async with httpx.AsyncClient() as anonymous:
            refused = await anonymous.post(f"{url}/mcp", json={"jsonrpc": "2.0", "method": "ping"})
        assert refused.status_code == 401 and "API key" in refused.json()["error"]
        headers = {"Authorization": f"Bearer {KEY}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
        ):
            await keeps_state_reports_errors_and_shows_images(client)
