"""ToolRegistry: the tools offered to a model, and dispatch of its calls to them.

Dispatch never raises for a model's mistake or a tool's failure: an unknown tool, input that
does not fit the schema, or a handler that throws all come back as error outcomes the model
can read and act on.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator
from typing import Any

from scratchpad.errors import ScratchpadError
from scratchpad.tools.base import ToolDef, ToolOutcome, as_outcome

log = logging.getLogger(__name__)

JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
}


class ToolRegistry:
    """The tools a session offers, by name: their specs for the model, and dispatch of its calls."""

    def __init__(self, tools: list[ToolDef] | None = None) -> None:
        self._tools: dict[str, ToolDef] = {}
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: ToolDef) -> bool:
        """Add a tool; False (and no change) when the name is taken."""
        if tool.name in self._tools:
            log.info("tool %r is already registered; the second one is skipped", tool.name)
            return False
        self._tools[tool.name] = tool
        return True

    def unregister(self, name: str) -> bool:
        return self._tools.pop(name, None) is not None

    def get(self, name: str) -> ToolDef | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def offered(self, context: Any = None) -> list[ToolDef]:
        """The tools to show the model now (a tool's ``offered`` check decides for it)."""
        return [
            tool
            for tool in self._tools.values()
            if tool.offered is None or context is None or tool.offered(context)
        ]

    def dump(self, context: Any = None) -> list[dict[str, Any]]:
        """What the model sees of each offered tool: name, description, input_schema."""
        return [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in self.offered(context)
        ]

    def prompt_fragments(self) -> list[str]:
        """System-prompt fragments of the registered tools, in registration order."""
        return [tool.prompt for tool in self._tools.values() if tool.prompt]

    async def dispatch(self, name: str, tool_input: Any, context: Any) -> ToolOutcome:
        """Run one call; every failure is an error outcome, never an exception."""
        tool = self._tools.get(name)
        if tool is None:
            available = ", ".join(self._tools) or "none"
            return ToolOutcome(
                f"Unknown tool {name!r}. Available tools: {available}.",
                ok=False,
                reason="unknown_tool",
            )
        problem = check_input(tool.input_schema, tool_input)
        if problem:
            return ToolOutcome(
                f"Invalid input for {name}: {problem}", ok=False, reason="invalid_input"
            )
        try:
            return await _run(tool, tool_input, context)
        except ScratchpadError as exc:
            return ToolOutcome(f"{name} failed: {exc}", ok=False, reason=type(exc).__name__)
        except Exception as exc:
            log.exception("tool %s raised", name)
            return ToolOutcome(f"{name} failed: {exc!r}", ok=False, reason="exception")


async def _run(tool: ToolDef, tool_input: dict[str, Any], context: Any) -> ToolOutcome:
    produced = tool.handler(context, tool_input)
    if inspect.isasyncgen(produced):
        return await _drain(produced, context)
    return as_outcome(await produced)  # type: ignore[misc]


async def _drain(generator: AsyncIterator[Any], context: Any) -> ToolOutcome:
    """An async-generator handler: its last item is the result; strings before it are
    progress."""
    progress = getattr(context, "progress", None)
    last: object = None
    seen = False
    async for item in generator:
        if seen and isinstance(last, str) and callable(progress):
            progress(last)
        last, seen = item, True
    if not seen:
        return ToolOutcome("the tool ended without a result", ok=False, reason="no_result")
    return as_outcome(last)


def check_input(schema: dict[str, Any], tool_input: Any) -> str:
    """The first problem of ``tool_input`` against the schema's top level ('' when fine)."""
    if not isinstance(tool_input, dict):
        return f"the input must be a JSON object, not {type(tool_input).__name__}"
    properties = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in tool_input:
            return f"missing required field {key!r}"
    for key, value in tool_input.items():
        expected = properties.get(key, {}).get("type")
        if isinstance(expected, str) and expected in JSON_TYPES and value is not None:
            wanted = JSON_TYPES[expected]
            wrong_bool = isinstance(value, bool) and expected in ("integer", "number")
            if wrong_bool or not isinstance(value, wanted):
                return f"field {key!r} must be of type {expected}, not {type(value).__name__}"
        allowed = properties.get(key, {}).get("enum")
        if allowed is not None and value not in allowed:
            return f"field {key!r} must be one of {', '.join(map(str, allowed))}, not {value!r}"
    return ""
