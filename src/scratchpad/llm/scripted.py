"""ScriptedProvider: a model that plays back a script, for tests and demos without an API."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from scratchpad.errors import LLMError
from scratchpad.llm.messages import (
    Block,
    Message,
    Response,
    TextBlock,
    ToolCall,
    ToolSpec,
    ToolUseBlock,
    Usage,
)
from scratchpad.llm.provider import Provider, ToolChoice

Turn = str | Sequence[ToolCall] | Response


class ScriptedProvider(Provider):
    """Replies with the scripted turns in order: a string is a text reply, a list of
    :class:`ToolCall` is a tool-use reply, a :class:`Response` is used as it is.

    Every request is recorded in ``requests`` (system, messages, tools, tool_choice,
    max_tokens), so tests can check what the model was shown.
    """

    name = "scripted"

    def __init__(self, turns: Sequence[Turn], *, model: str = "script") -> None:
        self.model = model
        self._turns = list(turns)
        self._next = 0
        self.requests: list[dict[str, Any]] = []

    @property
    def remaining(self) -> int:
        return len(self._turns) - self._next

    async def complete(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice | None = None,
        max_tokens: int = 4096,
    ) -> Response:
        self.requests.append(
            {
                "system": system,
                "messages": list(messages),
                "tools": list(tools),
                "tool_choice": copy.deepcopy(tool_choice),
                "max_tokens": max_tokens,
            }
        )
        if self._next >= len(self._turns):
            raise LLMError(
                f"ScriptedProvider ran out of turns after {len(self._turns)} replies; "
                "add more turns to the script"
            )
        turn = self._turns[self._next]
        self._next += 1
        return self._response(turn, len(self.requests), messages)

    def _response(self, turn: Turn, number: int, messages: Sequence[Message]) -> Response:
        prompt_size = sum(len(str(m.to_dict())) for m in messages) // 4
        if isinstance(turn, Response):
            return turn
        if isinstance(turn, str):
            usage = Usage(input_tokens=prompt_size, output_tokens=max(1, len(turn) // 4))
            return Response((TextBlock(turn),), (), usage, "end_turn")
        calls = tuple(
            call if call.id else _with_id(call, f"call_{number}_{index}")
            for index, call in enumerate(turn, start=1)
        )
        blocks: tuple[Block, ...] = tuple(ToolUseBlock(c.id, c.name, c.input) for c in calls)
        usage = Usage(input_tokens=prompt_size, output_tokens=10 * len(calls))
        return Response(blocks, calls, usage, "tool_use")


def _with_id(call: ToolCall, call_id: str) -> ToolCall:
    return ToolCall(call.name, call.input, call_id, call.parse_error, call.repaired)
