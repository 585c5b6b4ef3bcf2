"""The model seam: the scripted model, the provider adapter, and specs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from scratchpad.errors import ConfigError, LLMError
from scratchpad.llm.messages import TextBlock
from scratchpad.llm.scripted import ScriptedProvider
from scratchpad.memory import Model, ProviderModel, ScriptedModel, model_from_spec
from scratchpad.memory import cycle as cycle_module
from scratchpad.memory.toolbox import build_tools
from scratchpad.tools import ToolDef, ToolRegistry, ToolSessionContext
from tests.memory.helpers import make_agent, reply


async def test_scripted_model_replies_in_order_and_records_prompts() -> None:
    model = ScriptedModel(["one", "two"])
    assert await model.complete(system="s1", user="u1") == "one"
    assert await model.complete(system="s2", user="u2") == "two"
    assert model.prompts == [("s1", "u1"), ("s2", "u2")]
    with pytest.raises(LLMError, match="ran out of replies after 2"):
        await model.complete(system="s", user="u")
    assert isinstance(model, Model)


async def test_scripted_model_raises_an_exception_in_its_turn() -> None:
    model = ScriptedModel([ValueError("bad turn"), "after"])
    with pytest.raises(ValueError, match="bad turn"):
        await model.complete(system="", user="")
    assert await model.complete(system="", user="") == "after"


@pytest.mark.parametrize(
    ("content", "message"), [("{not json", "cannot read a JSON list"), ('{"a": 1}', "JSON list")]
)
def test_a_bad_script_file_is_a_config_error(tmp_path: Path, content: str, message: str) -> None:
    script = tmp_path / "script.json"
    script.write_text(content)
    with pytest.raises(ConfigError, match=message):
        ScriptedModel.from_file(script)
    with pytest.raises(ConfigError, match="cannot read"):
        ScriptedModel.from_file(tmp_path / "missing.json")


async def test_model_from_spec_reads_a_scripted_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["plain text", {"tool": "done", "args": {}}]))
    model = model_from_spec(f"scripted:{script}")
    assert isinstance(model, ScriptedModel)
    assert model.replies == ["plain text", '{"tool": "done", "args": {}}']  # objects as JSON
    assert await model.complete(system="", user="") == "plain text"
    assert json.loads(await model.complete(system="", user="")) == {"tool": "done", "args": {}}


def test_model_from_spec_refuses_an_unknown_provider() -> None:
    with pytest.raises(ConfigError, match="provider:model"):
        model_from_spec("nonsense")


async def test_provider_model_sends_one_user_message_and_returns_text() -> None:
    provider = ScriptedProvider(["first reply", "second reply"])
    model = ProviderModel(provider, max_tokens=123)
    assert await model.complete(system="rules", user="prompt 1") == "first reply"
    assert await model.complete(system="rules", user="prompt 2") == "second reply"
    request = provider.requests[1]
    assert request["system"] == "rules" and request["max_tokens"] == 123
    [message] = request["messages"]
    assert message.role == "user" and message.content == (TextBlock("prompt 2"),)


def test_a_cycle_runs_on_a_provider(tmp_path: Path) -> None:
    provider = ScriptedProvider([reply("echo", text="via provider"), reply("done", summary="p")])
    agent, _ = make_agent(tmp_path, [])
    agent.model = ProviderModel(provider)
    result = agent.run()
    assert result.outcome == "done" and result.summary == "p"
    assert "Your state:" in provider.requests[0]["messages"][0].text


class LoopRecordingModel(ScriptedModel):
    """Records the event loop each call runs on."""

    def __init__(self, replies: list[str], loops: list[tuple[str, object]]) -> None:
        super().__init__(replies)
        self.loops = loops

    async def complete(self, *, system: str, user: str) -> str:
        self.loops.append(("model", asyncio.get_running_loop()))
        return await super().complete(system=system, user=user)


def test_the_model_and_the_tools_of_a_cycle_run_on_one_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loops: list[tuple[str, object]] = []

    async def where(context: object, tool_input: dict[str, Any]) -> str:
        loops.append(("tool", asyncio.get_running_loop()))
        return "here"

    def tools_with_where(*args: Any) -> tuple[ToolRegistry, ToolSessionContext]:
        registry, context = build_tools(*args)
        registry.register(ToolDef("where", "the loop", {"type": "object"}, where))
        return registry, context

    monkeypatch.setattr(cycle_module, "build_tools", tools_with_where)
    agent, _ = make_agent(tmp_path, [])
    agent.model = LoopRecordingModel([reply("where"), reply("done")] * 2, loops)
    assert agent.run().outcome == "done"
    assert [kind for kind, _ in loops] == ["model", "tool", "model"]
    assert len({id(loop) for _, loop in loops}) == 1
    first = loops[0][1]
    loops.clear()
    agent.run()
    assert len({id(loop) for _, loop in loops}) == 1 and loops[0][1] is not first  # per cycle


async def test_a_scripted_setting_is_read_as_the_agents_replies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SCRATCHPAD_MODEL=scripted:FILE means what --model scripted:FILE means to an agent."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool": "done", "args": {}}]))
    monkeypatch.setenv("SCRATCHPAD_MODEL", f"scripted:{script}")
    model = model_from_spec(None)
    assert isinstance(model, ScriptedModel)
    assert json.loads(await model.complete(system="", user="")) == {"tool": "done", "args": {}}
