"""MCP tool metadata (titles, annotations, the name rule) and the ``list`` and ``cancel``
actions of the ``scratchpad`` tool, driven by the official MCP client in-process."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import jsonschema
from mcp import Client

from scratchpad.config import Settings
from tests.server.test_mcp import connected, run, texts

LONG = "import time\ntime.sleep(60)"


async def wait_busy(client: Client, pad: str) -> None:
    """Until ``list`` says the pad runs a cell (10 s at most)."""
    deadline = time.monotonic() + 10
    while f"'{pad}': busy" not in texts(await client.call_tool("scratchpad", {"action": "list"})):
        assert time.monotonic() < deadline, f"pad {pad!r} never became busy"
        await asyncio.sleep(0.05)


async def test_tools_have_titles_annotations_and_the_name_rule(
    settings: Settings, workspace: Path
) -> None:
    async with connected(settings, workspace) as client:
        listed = await client.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    pad, reader = tools["scratchpad"], tools["read_observation"]
    assert pad.title == "Python scratchpad" and pad.annotations is not None
    assert pad.annotations.read_only_hint is False
    assert pad.annotations.destructive_hint is True  # reset and remove
    assert pad.annotations.open_world_hint is True  # code reaches the network
    assert reader.title == "Read a saved observation" and reader.annotations is not None
    assert reader.annotations.read_only_hint is True
    assert reader.annotations.open_world_hint is False
    properties = pad.input_schema["properties"]
    # what a strict client sends for "none" ("" and 0) is within the schema
    assert properties["name"]["maxLength"] == 128 and "minLength" not in properties["name"]
    assert (
        properties["timeout_s"]["minimum"] == 0
        and "0: none" in properties["timeout_s"]["description"]
    )
    assert "control characters" in properties["name"]["description"]
    action = properties["action"]
    assert {"list", "cancel"} <= set(action["enum"])
    assert "Read-only: view, dump, list" in action["description"]
    assert "twice this estimate" in properties["estimated_execution_time_seconds"]["description"]
    assert pad.input_schema["required"] == ["action"]


async def test_list_shows_every_pad_with_its_status(settings: Settings, workspace: Path) -> None:
    async with connected(settings, workspace) as client:
        empty = await client.call_tool("scratchpad", {"action": "list"})
        assert not empty.is_error and "No pads yet" in texts(empty)
        for pad in ("a", "b"):
            assert not (await client.call_tool("scratchpad", run(pad, "1"))).is_error
        await client.call_tool("scratchpad", run("b", "2"))
        listed = texts(await client.call_tool("scratchpad", {"action": "list"}))
        nameless = await client.call_tool("scratchpad", {"action": "view"})
    assert "2 pad(s):" in listed
    assert "- 'a': idle, 1 cell(s)" in listed and "- 'b': idle, 2 cell(s)" in listed
    assert nameless.is_error and "missing required field 'name'" in texts(nameless)


async def test_list_shows_an_asleep_pad_with_when_it_was_last_active(
    settings: Settings, workspace: Path
) -> None:
    sleepy = settings.model_copy(update={"sleep_after_s": 0.4})
    async with connected(sleepy, workspace) as client:
        assert not (await client.call_tool("scratchpad", run("nap", "1"))).is_error
        deadline = time.monotonic() + 30
        while "'nap': asleep" not in (
            listed := texts(await client.call_tool("scratchpad", {"action": "list"}))
        ):
            assert time.monotonic() < deadline, f"the pad never fell asleep: {listed}"
            await asyncio.sleep(0.05)
        assert "- 'nap': asleep, 1 cell(s), active " in listed and " s ago" in listed
        woken = await client.call_tool("scratchpad", run("nap", "2 + 2"))
        assert not woken.is_error and "4" in texts(woken)


async def test_cancel_stops_a_cell_another_call_started(
    settings: Settings, workspace: Path
) -> None:
    async with connected(settings, workspace) as client:
        idle = await client.call_tool("scratchpad", {"action": "cancel", "name": "p"})
        assert idle.is_error and "no pad named 'p'" in texts(idle)
        await client.call_tool("scratchpad", run("p", "x = 41"))
        nothing = await client.call_tool("scratchpad", {"action": "cancel", "name": "p"})
        assert nothing.is_error and "runs no cell" in texts(nothing)

        running = asyncio.create_task(client.call_tool("scratchpad", run("p", LONG)))
        await wait_busy(client, "p")
        cancelled = await client.call_tool("scratchpad", {"action": "cancel", "name": "p"})
        assert not cancelled.is_error and "Cancelled the running cell" in texts(cancelled)
        ended = await asyncio.wait_for(running, 20)
        assert ended.is_error and "Cell cancelled (interrupted" in texts(ended)

        named = asyncio.create_task(
            client.call_tool("scratchpad", {**run("p", LONG), "cell_id": "long-1"})
        )
        await wait_busy(client, "p")
        by_id = {"action": "cancel", "name": "p", "cell_id": "long-1"}
        assert "Cancelled cell 'long-1'" in texts(await client.call_tool("scratchpad", by_id))
        assert "Cell cancelled (interrupted" in texts(await asyncio.wait_for(named, 20))
        after = await client.call_tool("scratchpad", run("p", "x + 1"))
    assert "[result]\n42" in texts(after)  # the variables outlived both cancels


STRICT_NONE = {
    "name": "",
    "code": "",
    "packages": [],
    "one_line_description": "",
    "estimated_execution_time_seconds": 0,
    "timeout_s": 0,
    "cell_id": "",
    "confirm_new_scratchpad": False,
}  # what a strict-schema client sends for the fields it has no value for


async def test_a_strict_clients_empty_fields_count_as_absent(
    settings: Settings, workspace: Path
) -> None:
    async with connected(settings, workspace) as client:
        ran = await client.call_tool(
            "scratchpad", {**STRICT_NONE, "action": "exec", "name": "p", "code": "x = 2\nx * 21"}
        )
        listed = await client.call_tool("scratchpad", {**STRICT_NONE, "action": "list"})
        view = {**STRICT_NONE, "action": "view", "name": "p"}
        viewed = await client.call_tool("scratchpad", view)
        nameless = await client.call_tool("scratchpad", {**STRICT_NONE, "action": "exec"})
    assert not ran.is_error and "[result]\n42" in texts(ran), texts(ran)
    assert not listed.is_error and "- 'p': idle, 1 cell(s)" in texts(listed)
    assert not viewed.is_error and "x * 21" in texts(viewed)
    assert nameless.is_error
    assert "missing required field 'name': action 'exec' needs a pad name" in texts(nameless)


async def test_the_schema_says_every_action_but_list_needs_a_name(
    settings: Settings, workspace: Path
) -> None:
    async with connected(settings, workspace) as client:
        listed = await client.list_tools()
        nameless = await client.call_tool("scratchpad", {"action": "exec"})
    schema = next(tool.input_schema for tool in listed.tools if tool.name == "scratchpad")
    assert not {"oneOf", "anyOf", "allOf"} & set(schema)  # Anthropic's API refuses them here
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"action": "list"})
    for action in ("exec", "view", "dump", "reset", "remove", "install", "cancel"):
        assert not validator.is_valid({"action": action}), action
        assert validator.is_valid({"action": action, "name": "p"}), action
    assert nameless.is_error and "missing required field 'name'" in texts(nameless)
