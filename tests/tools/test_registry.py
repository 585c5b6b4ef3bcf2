"""ToolRegistry: registration, what the model sees, and dispatch that never raises."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from scratchpad.errors import InvalidInputError
from scratchpad.llm.messages import ImageBlock, TextBlock
from scratchpad.tools import ToolDef, ToolOutcome, ToolRegistry

SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "times": {"type": "integer"},
        "mode": {"type": "string", "enum": ["a", "b"]},
    },
    "required": ["text"],
}


class Context:
    def __init__(self) -> None:
        self.progress_messages: list[str] = []

    def progress(self, message: str) -> None:
        self.progress_messages.append(message)


async def echo(context: Any, tool_input: dict[str, Any]) -> str:
    return str(tool_input["text"]) * int(tool_input.get("times", 1))


def tool(name: str = "echo", handler: Any = echo, **extra: Any) -> ToolDef:
    return ToolDef(name, f"the {name} tool", SCHEMA, handler, **extra)


def test_register_skips_a_taken_name_and_dump_shows_only_the_model_facing_parts() -> None:
    registry = ToolRegistry()
    assert registry.register(tool(prompt="Use echo to repeat."))
    assert not registry.register(tool(handler=None))
    assert registry.dump() == [
        {"name": "echo", "description": "the echo tool", "input_schema": SCHEMA}
    ]
    assert registry.prompt_fragments() == ["Use echo to repeat."]
    assert registry.unregister("echo") and registry.dump() == []
    assert registry.prompt_fragments() == []


def test_offered_tools_depend_on_the_context() -> None:
    registry = ToolRegistry([tool(), tool("hidden", offered=lambda context: context == "yes")])
    assert [t["name"] for t in registry.dump("no")] == ["echo"]
    assert [t["name"] for t in registry.dump("yes")] == ["echo", "hidden"]


async def test_dispatch_runs_the_handler() -> None:
    outcome = await ToolRegistry([tool()]).dispatch("echo", {"text": "ab", "times": 2}, None)
    assert outcome == ToolOutcome("abab")


async def test_unknown_tool_is_an_error_result() -> None:
    outcome = await ToolRegistry([tool()]).dispatch("nope", {}, None)
    assert not outcome.ok and outcome.reason == "unknown_tool"
    assert outcome.text == "Unknown tool 'nope'. Available tools: echo."


async def test_input_is_checked_against_the_schema() -> None:
    registry = ToolRegistry([tool()])
    for bad, message in [
        ({}, "missing required field 'text'"),
        ({"text": 3}, "field 'text' must be of type string, not int"),
        ({"text": "x", "times": True}, "field 'times' must be of type integer, not bool"),
        ({"text": "x", "mode": "c"}, "field 'mode' must be one of a, b, not 'c'"),
        ([1], "the input must be a JSON object, not list"),
    ]:
        outcome = await registry.dispatch("echo", bad, None)
        assert outcome.reason == "invalid_input" and message in outcome.text


async def test_handler_failures_become_error_results() -> None:
    async def broken(context: Any, tool_input: dict[str, Any]) -> str:
        raise RuntimeError("boom")

    async def refusing(context: Any, tool_input: dict[str, Any]) -> str:
        raise InvalidInputError("give a shorter text")

    async def odd(context: Any, tool_input: dict[str, Any]) -> Any:
        return 42

    registry = ToolRegistry([tool("broken", broken), tool("refusing", refusing), tool("odd", odd)])
    assert (await registry.dispatch("broken", {"text": ""}, None)).text == (
        "broken failed: RuntimeError('boom')"
    )
    refused = await registry.dispatch("refusing", {"text": ""}, None)
    assert refused.text == "refusing failed: give a shorter text"
    assert refused.reason == "InvalidInputError"
    assert (await registry.dispatch("odd", {"text": ""}, None)).reason == "bad_result"


async def test_generator_handlers_report_progress_then_a_result() -> None:
    async def slow(context: Any, tool_input: dict[str, Any]) -> AsyncIterator[Any]:
        yield "step 1"
        yield "step 2"
        yield [TextBlock("done"), ImageBlock("image/png", "iVBOR")]

    context = Context()
    outcome = await ToolRegistry([tool("slow", slow)]).dispatch("slow", {"text": ""}, context)
    assert context.progress_messages == ["step 1", "step 2"]
    assert outcome.blocks() == (TextBlock("done"), ImageBlock("image/png", "iVBOR"))
