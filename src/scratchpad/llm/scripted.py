"""ScriptedProvider: a model that plays back a script, for tests and demos without an API.

A script is a list of turns, given in Python or read from a JSON file (``from_file``; the
``scripted:FILE`` model spec), so a server or a CLI command can run on one without a key.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scratchpad.errors import ConfigError, LLMError
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

TURN_FORMS = (
    'a text (a string), a list of tool calls [{"name": ..., "input": {...}}], or '
    '{"text": "...", "tool_calls": [...]}'
)
CALL_KEYS = {"name", "input"}
REPLY_KEYS = {"text", "tool_calls"}


@dataclass(frozen=True, slots=True)
class TextAndCalls:
    """A turn that says something, then calls tools, in one reply."""

    text: str
    calls: tuple[ToolCall, ...]


Reply = str | Sequence[ToolCall] | TextAndCalls | Response
Turn = Reply | Callable[[list[Message]], Reply]


class ScriptedProvider(Provider):
    """Replies with the scripted turns in order: a string is a text reply, a list of
    :class:`ToolCall` is a tool-use reply, :class:`TextAndCalls` is text then tool calls, a
    :class:`Response` is used as it is, and a callable is called with the messages so far
    and returns one of those (a scripted model that reads a tool's result, for tests).

    Every request is recorded in ``requests`` (system, messages, tools, tool_choice,
    max_tokens), so tests can check what the model was shown.
    """

    name = "scripted"

    def __init__(self, turns: Sequence[Turn], *, model: str = "script") -> None:
        self.model = model
        self._turns = list(turns)
        self._next = 0
        self.requests: list[dict[str, Any]] = []

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedProvider:
        """The turns of a JSON file: a list whose items are each a text (a string), a list
        of tool calls ``[{"name": ..., "input": {...}}]``, or ``{"text": ..., "tool_calls":
        [...]}``; anything else is a ConfigError naming the file and the turn."""
        items = read_json_list(path, "scripted provider", "turns")
        turns = [_file_turn(item, index, path) for index, item in enumerate(items)]
        return cls(turns, model=str(path))

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
        reply = turn(list(messages)) if callable(turn) else turn
        return self._response(reply, len(self.requests), messages)

    def _response(self, turn: Reply, number: int, messages: Sequence[Message]) -> Response:
        prompt_size = sum(len(str(m.to_dict())) for m in messages) // 4
        if isinstance(turn, Response):
            return turn
        if isinstance(turn, str):
            usage = Usage(input_tokens=prompt_size, output_tokens=max(1, len(turn) // 4))
            return Response((TextBlock(turn),), (), usage, "end_turn")
        text, listed = (turn.text, turn.calls) if isinstance(turn, TextAndCalls) else ("", turn)
        calls = tuple(
            call if call.id else _with_id(call, f"call_{number}_{index}")
            for index, call in enumerate(listed, start=1)
        )
        blocks: tuple[Block, ...] = (TextBlock(text),) if text else ()
        blocks += tuple(ToolUseBlock(c.id, c.name, c.input) for c in calls)
        output_tokens = len(text) // 4 + 10 * len(calls)
        usage = Usage(input_tokens=prompt_size, output_tokens=output_tokens)
        return Response(blocks, calls, usage, "tool_use")


def _with_id(call: ToolCall, call_id: str) -> ToolCall:
    return ToolCall(call.name, call.input, call_id, call.parse_error, call.repaired)


def read_json_list(path: str | Path, what: str, items: str) -> list[Any]:
    """The JSON list a script file holds (``what`` and ``items`` name it in errors), or a
    ConfigError naming the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{what} {path}: cannot read a JSON list ({exc})") from exc
    if not isinstance(data, list):
        raise ConfigError(
            f"{what} {path}: must hold a JSON list of {items}, not {_json_kind(data)}"
        )
    return data


def _file_turn(item: Any, index: int, path: str | Path) -> Turn:
    try:
        return _parse_turn(item)
    except ValueError as exc:
        raise ConfigError(
            f"scripted provider {path}: turn {index} (counting from 0) {exc}; a turn is "
            f"{TURN_FORMS}"
        ) from None


def _parse_turn(item: Any) -> Turn:
    """One turn of a script file; a ValueError says what is wrong with it."""
    if isinstance(item, str):
        return item
    if isinstance(item, list):
        if not item:
            raise ValueError("is an empty list of tool calls")
        return [_parse_call(call) for call in item]
    if not isinstance(item, dict):
        raise ValueError(f"is {_json_kind(item)}")
    if unknown := sorted(set(item) - REPLY_KEYS):
        raise ValueError(f"has unknown keys {', '.join(map(repr, unknown))}")
    text, calls = item.get("text", ""), item.get("tool_calls", [])
    if not isinstance(text, str):
        raise ValueError(f'has a "text" that is {_json_kind(text)}, not a string')
    if not isinstance(calls, list):
        raise ValueError(f'has "tool_calls" that is {_json_kind(calls)}, not a list')
    if not text and not calls:
        raise ValueError("has neither text nor tool calls")
    return TextAndCalls(text, tuple(_parse_call(call) for call in calls)) if calls else text


def _parse_call(call: Any) -> ToolCall:
    shown = json.dumps(call, ensure_ascii=False)[:80]
    if not isinstance(call, dict) or set(call) - CALL_KEYS:
        raise ValueError(f'has a tool call that is not {{"name": ..., "input": {{...}}}}: {shown}')
    name, tool_input = call.get("name"), call.get("input", {})
    if not isinstance(name, str) or not name:
        raise ValueError(f'has a tool call without a "name" string: {shown}')
    if not isinstance(tool_input, dict):
        raise ValueError(f'has a tool call whose "input" is not a JSON object: {shown}')
    return ToolCall(name, tool_input)


def _json_kind(value: Any) -> str:
    """How JSON calls the value's type, with its article."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"
