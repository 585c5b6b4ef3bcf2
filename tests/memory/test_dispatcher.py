"""The dispatcher's rules, one by one, against a real tool registry."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scratchpad.config import Settings
from scratchpad.errors import ReplyError
from scratchpad.memory import Dispatcher, default_state, parse_reply
from scratchpad.memory.state import State
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools.base import ToolDef
from scratchpad.tools.context import ToolSessionContext
from scratchpad.tools.echo_tool import echo_tool
from scratchpad.tools.registry import ToolRegistry
from tests.memory.helpers import reply


async def handle_long(context: object, tool_input: dict[str, Any]) -> str:
    return "x" * 1000


async def handle_broken(context: object, tool_input: dict[str, Any]) -> str:
    raise RuntimeError("the tool broke")


@pytest.fixture
def context(tmp_path: Path) -> ToolSessionContext:
    manager = ScratchpadManager(workspace=tmp_path, settings=Settings(home=tmp_path))
    return ToolSessionContext(manager=manager, turn_id="agent:test")


@pytest.fixture
def dispatcher(context: ToolSessionContext) -> Iterator[Dispatcher]:
    registry = ToolRegistry([echo_tool()])
    registry.register(ToolDef("long", "Long output.", {"type": "object"}, handle_long))
    registry.register(ToolDef("broken", "Raises.", {"type": "object"}, handle_broken))
    with asyncio.Runner() as runner:
        yield Dispatcher(registry, context, runner.run)


@pytest.fixture
def state() -> State:
    state = default_state()
    state.update(
        current_task="write the parser",
        pending_actions=["test it", "ship it"],
        completed_tasks=[{"task": "plan", "summary": "planned"}],
        notes="earlier note",
    )
    return state


# -- parsing ---------------------------------------------------------------------------------
def test_plain_json_is_parsed() -> None:
    assert parse_reply('{"tool": "echo", "args": {"text": "hi"}}') == ("echo", {"text": "hi"})


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"tool": "done", "args": {"summary": "s"}}\n```',
        '```\n{"tool": "done", "args": {"summary": "s"}}\n```',
        'Here you go:\n```json\n{"tool": "done", "args": {"summary": "s"}}\n```\nBye.',
        '  \n{"tool": "done", "args": {"summary": "s"}}\n\n',
    ],
)
def test_json_in_a_fenced_block_is_tolerated(text: str) -> None:
    assert parse_reply(text) == ("done", {"summary": "s"})


def test_missing_args_mean_no_args() -> None:
    assert parse_reply('{"tool": "done"}') == ("done", {})


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("I will now think.", "not valid JSON"),
        ('{"tool": "echo", "args": ', "not valid JSON"),
        ("```json\nnot json\n```", "not valid JSON"),
        ('["echo"]', "expected a JSON object, got a JSON list"),
        ('{"args": {}}', 'no "tool"'),
        ('{"tool": "echo", "args": [1]}', '"args" must be a JSON object'),
    ],
)
def test_replies_that_are_not_a_call_are_refused(text: str, reason: str) -> None:
    with pytest.raises(ReplyError, match=reason):
        parse_reply(text)


HUGE_NUMBER = '{"tool": "echo", "args": {"text": ' + "9" * 5000 + "}}"
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (HUGE_NUMBER, "Exceeds the limit"),  # ValueError, not a JSONDecodeError
        (DEEP, "nested too deep"),  # RecursionError
        (f"```json\n{DEEP}\n```", "not valid JSON"),  # the reason given is the whole reply's
        (f"```json\n{HUGE_NUMBER}\n```", "not valid JSON"),
    ],
)
def test_json_that_python_cannot_read_is_a_parse_error(
    dispatcher: Dispatcher, state: State, text: str, reason: str
) -> None:
    with pytest.raises(ReplyError, match=reason):
        parse_reply(text)
    step = dispatcher.dispatch(text, state)
    assert step.kind == "parse_error" and not step.done
    assert state["notes"].startswith("earlier note\n[PARSE ERROR] not valid JSON (")
    assert reason in state["notes"] and len(state["notes"]) < 1000


def test_a_tool_call_counts_the_steps(dispatcher: Dispatcher, state: State) -> None:
    dispatcher.dispatch(reply("echo", text="a"), state)
    dispatcher.dispatch(reply("echo", text="b"), state)
    assert dispatcher.context.step_num == 2


# -- the four rules --------------------------------------------------------------------------
def test_a_tool_call_appends_the_exact_tool_line(dispatcher: Dispatcher, state: State) -> None:
    before = json.loads(json.dumps(state))
    step = dispatcher.dispatch(reply("echo", text="héllo"), state)
    assert step.kind == "tool" and not step.done
    assert state["notes"] == 'earlier note\n[TOOL] echo({"text": "héllo"}) → héllo'
    assert {k: v for k, v in state.items() if k != "notes"} == {
        k: v for k, v in before.items() if k != "notes"
    }  # the task queue does not change


def test_a_tool_result_is_cut_to_300_characters(dispatcher: Dispatcher, state: State) -> None:
    dispatcher.dispatch(reply("long"), state)
    assert state["notes"].endswith("[TOOL] long({}) → " + "x" * 300)


def test_tool_failures_and_unknown_tools_are_notes(dispatcher: Dispatcher, state: State) -> None:
    dispatcher.dispatch(reply("broken"), state)
    dispatcher.dispatch(reply("shell", command="ls"), state)
    dispatcher.dispatch(reply("echo"), state)  # missing required input
    lines = state["notes"].splitlines()
    assert lines[1].startswith("[TOOL] broken({}) → broken failed: RuntimeError('the tool broke')")
    assert lines[2].startswith("[TOOL] shell(") and "Unknown tool 'shell'" in lines[2]
    assert "missing required field 'text'" in lines[3]


def test_update_extends_completed_replaces_pending_and_sets_the_rest(
    dispatcher: Dispatcher, state: State
) -> None:
    step = dispatcher.dispatch(
        reply(
            "update_scratchpad",
            completed_tasks=[{"task": "a", "summary": "b"}],
            pending_actions=["only this"],
            goals=["new goal"],
            mood="focused",
        ),
        state,
    )
    assert step.kind == "update" and not step.done
    assert state["completed_tasks"] == [
        {"task": "plan", "summary": "planned"},
        {"task": "a", "summary": "b"},
    ]
    assert state["pending_actions"] == ["only this"]
    assert state["goals"] == ["new goal"] and state["mood"] == "focused"
    assert state["notes"] == "earlier note"  # an update adds no note


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (
            {"pending_actions": "one", "goals": ["g"]},
            "update_scratchpad: key 'pending_actions' must be a list (e.g. [] or '- item' "
            "lines), not str 'one'",
        ),
        ({"notes": 5}, "update_scratchpad: key 'notes' must be text, not int 5"),
        ({"completed_tasks": {"a": 1}}, "key 'completed_tasks' must be a list"),
        ({"last_updated": "2020"}, "last_updated is stamped when the cycle ends and cannot be set"),
    ],
)
def test_an_invalid_update_changes_nothing_and_says_why(
    dispatcher: Dispatcher, state: State, args: dict[str, Any], problem: str
) -> None:
    untouched = json.loads(json.dumps(state))
    step = dispatcher.dispatch(reply("update_scratchpad", **args), state)
    assert step.kind == "update_error"
    assert state["notes"].startswith("earlier note\n[UPDATE ERROR] ")
    assert problem in state["notes"] and state["notes"].endswith("; nothing was changed")
    assert {k: v for k, v in state.items() if k != "notes"} == {
        k: v for k, v in untouched.items() if k != "notes"
    }


def test_an_update_to_null_gives_the_default(dispatcher: Dispatcher, state: State) -> None:
    dispatcher.dispatch(reply("update_scratchpad", pending_actions=None, mood=None), state)
    assert state["pending_actions"] == [] and state["mood"] is None


def test_done_moves_the_task_and_takes_the_next(dispatcher: Dispatcher, state: State) -> None:
    step = dispatcher.dispatch(reply("done", summary="parser written"), state)
    assert step.done and step.kind == "done" and step.summary == "parser written"
    assert state["completed_tasks"][-1] == {"task": "write the parser", "summary": "parser written"}
    assert state["current_task"] == "test it"
    assert state["pending_actions"] == ["ship it"]
    assert state["notes"] == "earlier note\n[COMPLETED] parser written"


def test_done_with_nothing_pending_leaves_no_current_task(dispatcher: Dispatcher) -> None:
    state = default_state()
    state["current_task"] = {"title": "last", "priority": 1}
    dispatcher.dispatch(reply("done", summary="all done"), state)
    assert state["current_task"] is None and state["pending_actions"] == []
    assert state["completed_tasks"] == [
        {"task": {"title": "last", "priority": 1}, "summary": "all done"}
    ]


def test_done_without_a_current_task_completes_nothing(dispatcher: Dispatcher) -> None:
    state = default_state()
    state["pending_actions"] = ["first"]
    dispatcher.dispatch(reply("done", summary="warm-up"), state)
    assert state["completed_tasks"] == []
    assert state["current_task"] == "first"
    assert state["notes"] == "\n[COMPLETED] warm-up"


def test_a_parse_error_is_noted_and_changes_nothing_else(
    dispatcher: Dispatcher, state: State
) -> None:
    step = dispatcher.dispatch("Let me think about it...", state)
    assert step.kind == "parse_error" and not step.done
    assert state["notes"].startswith("earlier note\n[PARSE ERROR] not valid JSON")
    assert "Let me think about it..." in state["notes"]
    assert state["current_task"] == "write the parser"
