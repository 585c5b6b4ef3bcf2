"""``scripted:FILE``: a ScriptedProvider read from a JSON script, wherever a model spec goes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scratchpad.agent import Session
from scratchpad.config import Settings
from scratchpad.errors import ConfigError, LLMError
from scratchpad.llm import Message, ScriptedProvider, TextBlock, ToolCall, ToolUseBlock
from scratchpad.llm.adapters import create_provider, parse_model_spec
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools import builtin_registry

SCRIPT: list[Any] = [
    "plain text",
    [{"name": "echo", "input": {"text": "a"}}, {"name": "echo"}],
    {"text": "Let me look.", "tool_calls": [{"name": "echo", "input": {"text": "b"}}]},
    {"text": "only text"},
]


def script(tmp_path: Path, turns: Any, name: str = "script.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(turns))
    return path


async def ask(provider: ScriptedProvider) -> Any:
    return await provider.complete(system="", messages=[Message.user("go")])


async def test_every_form_of_turn(tmp_path: Path) -> None:
    path = script(tmp_path, SCRIPT)
    provider = ScriptedProvider.from_file(path)
    assert (provider.name, provider.model, provider.remaining) == ("scripted", str(path), 4)
    text = await ask(provider)
    assert text.content == (TextBlock("plain text"),) and text.stop_reason == "end_turn"
    calls = await ask(provider)
    assert calls.tool_calls == (
        ToolCall("echo", {"text": "a"}, "call_2_1"),
        ToolCall("echo", {}, "call_2_2"),
    )
    both = await ask(provider)
    assert both.content == (
        TextBlock("Let me look."),
        ToolUseBlock("call_3_1", "echo", {"text": "b"}),
    )
    assert both.stop_reason == "tool_use" and len(both.tool_calls) == 1
    assert (await ask(provider)).content == (TextBlock("only text"),)
    with pytest.raises(LLMError, match="ran out of turns"):
        await ask(provider)


@pytest.mark.parametrize(
    ("turn", "problem"),
    [
        (5, "is a number"),
        (None, "is null"),
        ({}, "has neither text nor tool calls"),
        ({"txt": "a"}, "has unknown keys 'txt'"),
        ({"text": 1}, 'has a "text" that is a number'),
        ({"text": "a", "tool_calls": {"name": "x"}}, '"tool_calls" that is an object'),
        ([], "is an empty list of tool calls"),
        (["echo"], 'has a tool call that is not {"name"'),
        ([{"name": "echo", "args": {}}], 'has a tool call that is not {"name"'),
        ([{"input": {}}], 'without a "name" string'),
        ([{"name": "echo", "input": [1]}], '"input" is not a JSON object'),
    ],
)
def test_a_bad_turn_names_the_file_and_its_index(tmp_path: Path, turn: Any, problem: str) -> None:
    path = script(tmp_path, ["fine", turn])
    with pytest.raises(ConfigError) as caught:
        ScriptedProvider.from_file(path)
    message = str(caught.value)
    assert message.startswith(f"scripted provider {path}: turn 1 (counting from 0) ")
    assert problem in message
    assert "a turn is a text (a string), a list of tool calls" in message


@pytest.mark.parametrize(
    ("content", "problem"),
    [("{not json", "cannot read a JSON list"), ('{"a": 1}', "JSON list of turns, not an object")],
)
def test_a_file_that_is_no_script(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "script.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=problem):
        ScriptedProvider.from_file(path)
    with pytest.raises(ConfigError, match=r"missing\.json: cannot read"):
        create_provider(f"scripted:{tmp_path / 'missing.json'}", settings=Settings())


def test_the_spec_parses_like_any_other() -> None:
    assert parse_model_spec("scripted:/tmp/a:b.json") == ("scripted", "/tmp/a:b.json")
    with pytest.raises(ConfigError, match="'scripted:FILE'"):
        parse_model_spec("scripted:")


async def test_each_provider_of_the_spec_starts_the_script_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = script(tmp_path, ["first", "second"])
    monkeypatch.setenv("SCRATCHPAD_MODEL", f"scripted:{path}")
    one, two = create_provider(), create_provider()  # the setting, as a server reads it
    assert isinstance(one, ScriptedProvider) and isinstance(two, ScriptedProvider)
    assert (await ask(one)).text == "first"
    assert (await ask(one)).text == "second"
    assert (await ask(two)).text == "first"


async def test_a_session_runs_on_a_script(tmp_path: Path, manager: ScratchpadManager) -> None:
    path = script(tmp_path, [SCRIPT[2], "Echoed b."])
    session = Session(
        provider=create_provider(f"scripted:{path}", settings=manager.settings),
        manager=manager,
        registry=builtin_registry(echo=True, images=False),
        persist=False,
    )
    kinds: list[str] = []
    session.subscribe(lambda event: kinds.append(event.kind))
    assert await session.turn("echo b") == "Echoed b."
    assert kinds[:2] == ["text_delta", "tool_call"] and "tool_result" in kinds
