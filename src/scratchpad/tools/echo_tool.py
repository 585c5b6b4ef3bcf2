"""The ``echo`` tool: gives its text back; a harmless way to check that tool calls work."""

from __future__ import annotations

from typing import Any

from scratchpad.tools.base import ToolDef

NAME = "echo"
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "The text to give back."}},
    "required": ["text"],
}
DESCRIPTION = "Give `text` back unchanged (checks that a tool call works; no side effects)."


def echo_tool() -> ToolDef:
    return ToolDef(NAME, DESCRIPTION, INPUT_SCHEMA, handle_echo)


async def handle_echo(context: object, tool_input: dict[str, Any]) -> str:
    return str(tool_input["text"])
