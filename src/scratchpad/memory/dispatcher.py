"""The dispatcher: what one model reply (a JSON object) does to the state.

- ``{"tool": NAME, "args": {...}}`` calls the tool through the registry and appends
  ``\\n[TOOL] NAME(args) → <result, first 300 chars>`` to ``notes``; the queue is unchanged.
- ``{"tool": "update_scratchpad", "args": {...}}``: ``completed_tasks`` is extended,
  ``pending_actions`` replaced, any other key set. An update that would make the state
  invalid (``goals: 5``) changes nothing and appends ``\\n[UPDATE ERROR] ...`` instead.
- ``{"tool": "done", "args": {"summary": ...}}``: the current task (if any) moves to
  ``completed_tasks`` as ``{task, summary}``, the next pending action becomes
  ``current_task`` (or null), ``\\n[COMPLETED] summary`` is appended, and the cycle ends.
- Anything that is not such a JSON object (a JSON object inside a fenced code block is
  accepted) appends ``\\n[PARSE ERROR] ...`` and the loop goes on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal

from scratchpad.errors import AgentStateError, ReplyError
from scratchpad.memory.notes import append_note
from scratchpad.memory.state import State, validate_state
from scratchpad.tools.base import ToolOutcome
from scratchpad.tools.context import ToolSessionContext
from scratchpad.tools.registry import ToolRegistry

UPDATE = "update_scratchpad"
DONE = "done"
RESULT_CHARS = 300
SHOWN_REPLY_CHARS = 200
FENCED = re.compile(r"```[\w+-]*[ \t]*\r?\n(.*?)```", re.DOTALL)
StepKind = Literal["tool", "update", "done", "parse_error", "update_error"]
Runner = Callable[[Coroutine[Any, Any, ToolOutcome]], ToolOutcome]


@dataclass(frozen=True, slots=True)
class Step:
    """What one reply did: its kind, the note line it appended, whether the cycle ends."""

    kind: StepKind
    note: str | None = None
    done: bool = False
    summary: str | None = None


def parse_reply(reply: str) -> tuple[str, dict[str, Any]]:
    """``(tool, args)`` from the reply, or ReplyError saying what was wrong."""
    value = _json_value(reply)
    if not isinstance(value, dict):
        raise ReplyError(f"expected a JSON object, got a JSON {type(value).__name__}")
    tool, args = value.get("tool"), value.get("args", {})
    if not isinstance(tool, str) or not tool:
        raise ReplyError('the object has no "tool" name')
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ReplyError(f'"args" must be a JSON object, not a JSON {type(args).__name__}')
    return tool, args


def _json_value(reply: str) -> Any:
    """The reply as JSON, or the first fenced code block that is JSON.

    Besides JSONDecodeError (a ValueError), ``json.loads`` raises ValueError for an integer
    of more than 4300 digits and RecursionError for brackets nested too deep: all three
    mean the reply is not JSON we can use.
    """
    try:
        return json.loads(reply)
    except (ValueError, RecursionError) as exc:
        first_error = _reason(exc)
    for block in FENCED.finditer(reply):
        try:
            return json.loads(block.group(1))
        except (ValueError, RecursionError):
            continue
    raise ReplyError(f"not valid JSON ({first_error})")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deep"
    return str(exc)[:SHOWN_REPLY_CHARS]


class Dispatcher:
    """Applies replies to a state; tool calls go through ``registry`` via ``run``."""

    def __init__(self, registry: ToolRegistry, context: ToolSessionContext, run: Runner) -> None:
        self.registry = registry
        self.context = context
        self.run = run

    def dispatch(self, reply: str, state: State) -> Step:
        """Apply one reply to ``state`` (in place)."""
        try:
            tool, args = parse_reply(reply)
        except ReplyError as exc:
            shown = reply.strip()[:SHOWN_REPLY_CHARS]
            return _noted(state, "parse_error", f"[PARSE ERROR] {exc}; the reply was: {shown!r}")
        if tool == UPDATE:
            return update(state, args)
        if tool == DONE:
            return complete(state, args)
        return self.call_tool(state, tool, args)

    def call_tool(self, state: State, tool: str, args: dict[str, Any]) -> Step:
        self.context.step_num += 1
        outcome = self.run(self.registry.dispatch(tool, args, self.context))
        shown_args = json.dumps(args, ensure_ascii=False)
        return _noted(state, "tool", f"[TOOL] {tool}({shown_args}) → {outcome.text[:RESULT_CHARS]}")


def update(state: State, args: dict[str, Any]) -> Step:
    """``update_scratchpad``: all of it, or nothing and an ``[UPDATE ERROR]`` note."""
    if "last_updated" in args:
        problem = "last_updated is stamped when the cycle ends and cannot be set"
        return _noted(state, "update_error", f"[UPDATE ERROR] {problem}; nothing was changed")
    try:  # the state as it would be, checked like a state file (null: the default)
        checked = validate_state({**state, **args}, UPDATE, hint="")
    except AgentStateError as exc:
        return _noted(state, "update_error", f"[UPDATE ERROR] {exc}; nothing was changed")
    for key in args:
        if key == "completed_tasks":
            state["completed_tasks"] = [*state.get("completed_tasks", []), *checked[key]]
        else:  # pending_actions is replaced like any other key
            state[key] = checked[key]
    return Step("update")


def complete(state: State, args: dict[str, Any]) -> Step:
    """``done``: close the current task, take the next pending action, end the cycle."""
    summary = args.get("summary", "")
    summary = summary if isinstance(summary, str) else json.dumps(summary, ensure_ascii=False)
    task = state.get("current_task")
    if task is not None:
        state["completed_tasks"] = [*state["completed_tasks"], {"task": task, "summary": summary}]
    pending = list(state.get("pending_actions") or [])
    state["current_task"] = pending.pop(0) if pending else None
    state["pending_actions"] = pending
    line = f"[COMPLETED] {summary}"
    append_note(state, line)
    return Step("done", line, done=True, summary=summary)


def _noted(state: State, kind: StepKind, line: str) -> Step:
    append_note(state, line)
    return Step(kind, line)
