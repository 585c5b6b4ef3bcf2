"""The ``read_observation`` tool: slices of large outputs saved in the observation store."""

from __future__ import annotations

import asyncio
from typing import Any

from scratchpad.errors import InvalidInputError
from scratchpad.observations.models import READ_MODES
from scratchpad.tools.base import ToolDef, ToolHints, given
from scratchpad.tools.context import ToolSessionContext

NAME = "read_observation"
TITLE = "Read a saved observation"
HINTS = ToolHints(read_only=True, idempotent=True)  # reads this server's store, nothing else
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "observation_id": {"type": "string", "description": "From a saved observation."},
        "mode": {"type": "string", "enum": list(READ_MODES), "description": "Default head."},
        "n": {"type": "integer", "description": "head/tail: characters (default 2000)."},
        "start": {"type": "integer", "description": "range: first char; lines: first line."},
        "end": {"type": "integer", "description": "range: end char (exclusive); lines: last."},
        "pattern": {"type": "string", "description": "grep: a regular expression."},
        "context": {"type": "integer", "description": "grep: lines around each match."},
        "max_matches": {"type": "integer", "description": "grep: matches to show (50)."},
    },
    "required": ["observation_id"],
}
DESCRIPTION = (
    "Read a large output that was saved as an observation (you saw its summary and id). "
    "Modes: head/tail (n characters), range (start..end characters), lines (start..end, "
    "1-based), grep (pattern, with context lines), full (small entries only). Every answer "
    "says which part it is and how much is left."
)


def read_observation_tool() -> ToolDef:
    """The ``read_observation`` tool: a stored observation read back by id."""
    return ToolDef(
        NAME,
        DESCRIPTION,
        INPUT_SCHEMA,
        handle_read_observation,
        offered=offered,
        title=TITLE,
        hints=HINTS,
    )


def offered(context: ToolSessionContext) -> bool:
    """Offer the tool only when the current turn has stored observations."""
    store = context.store
    return store is not None and bool(store.list_for_turn(context.turn_id))


async def handle_read_observation(context: ToolSessionContext, tool_input: dict[str, Any]) -> str:
    """The slice asked for, read on a worker thread: a long read or grep never holds up the
    event loop (other tool calls, streams, the server's health check)."""
    if context.store is None:
        raise InvalidInputError("no observation store is configured for this session")
    tool_input = {**given(tool_input), "observation_id": tool_input["observation_id"]}
    result = await asyncio.to_thread(
        context.store.read,
        tool_input["observation_id"],
        tool_input.get("mode") or "head",
        n=tool_input.get("n") or 2000,
        start=tool_input.get("start"),
        end=tool_input.get("end"),
        pattern=tool_input.get("pattern"),
        context=tool_input.get("context") or 0,
        max_matches=tool_input.get("max_matches") or 50,
        turn_id=context.turn_id,
    )
    return result.render()
