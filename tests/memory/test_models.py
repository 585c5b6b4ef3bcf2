"""The model seam: the scripted model, the provider adapter, and specs."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from scratchpad.errors import ConfigError, LLMError
from scratchpad.llm.messages import TextBlock
from scratchpad.llm.scripted import ScriptedProvider
from scratchpad.memory import Model, ProviderModel, ScriptedModel, model_from_spec
from scratchpad.memory import cycle as cycle_module
from scratchpad.memory.models import reply_of
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


class SyncModel:
    """A seed-style model: ``complete`` is a plain function. Records the thread of each call;
    ``wait_for`` (set) makes each call wait for that event first, up to ``deadline_s``."""

    def __init__(self, replies: list[Any], wait_for: threading.Event | None = None) -> None:
        self.replies = replies
        self.threads: list[int] = []
        self.wait_for = wait_for
        self.waited: list[bool] = []

    def complete(self, *, system: str, user: str) -> str:  # a test may hand back no text
        self.threads.append(threading.get_ident())
        if self.wait_for is not None:
            self.waited.append(self.wait_for.wait(timeout=10))
        reply: str = self.replies[len(self.threads) - 1]
        return reply


def test_a_cycle_runs_on_a_synchronous_model(tmp_path: Path) -> None:
    model = SyncModel([reply("echo", text="sync"), reply("done", summary="plain")])
    assert isinstance(model, Model)
    agent, _ = make_agent(tmp_path, [])
    agent.model = model
    result = agent.run()
    assert (result.outcome, result.summary, result.error) == ("done", "plain", None)
    assert len(model.threads) == 2 and threading.get_ident() not in model.threads


def test_a_synchronous_model_does_not_block_the_cycles_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a plain ``complete`` waits, work on the cycle's loop goes on: a task the tool
    left behind sets the event the model's next call waits for (were the call made on the
    loop, it would wait out its deadline instead)."""
    event = threading.Event()
    event.set()  # the first call goes through
    tasks: list[asyncio.Task[None]] = []

    async def set_soon() -> None:
        await asyncio.sleep(0.05)  # after the tool's step has returned
        event.set()

    async def later(context: object, tool_input: dict[str, Any]) -> str:
        event.clear()
        tasks.append(asyncio.get_running_loop().create_task(set_soon()))
        return "scheduled"

    def tools_with_later(*args: Any) -> tuple[ToolRegistry, ToolSessionContext]:
        registry, context = build_tools(*args)
        registry.register(ToolDef("later", "sets the event soon", {"type": "object"}, later))
        return registry, context

    monkeypatch.setattr(cycle_module, "build_tools", tools_with_later)
    agent, _ = make_agent(tmp_path, [])
    model = SyncModel([reply("later"), reply("done", summary="unblocked")], wait_for=event)
    agent.model = model
    result = agent.run()
    assert (result.outcome, result.summary) == ("done", "unblocked")
    assert model.waited == [True, True] and tasks[0].done()


def test_a_synchronous_model_that_raises_fails_the_cycle_with_its_error(tmp_path: Path) -> None:
    class Failing:
        def complete(self, *, system: str, user: str) -> str:
            raise RuntimeError("seed model exploded")

    agent, _ = make_agent(tmp_path, [])
    agent.model = Failing()
    result = agent.run()
    assert result.outcome == "failed" and result.error == "RuntimeError: seed model exploded"


@pytest.mark.parametrize("bad", [None, 42, b"bytes"])
def test_a_reply_that_is_not_text_fails_the_cycle_saying_so(tmp_path: Path, bad: object) -> None:
    agent, _ = make_agent(tmp_path, [])
    agent.model = SyncModel([bad])
    result = agent.run()
    assert result.outcome == "failed"
    assert f"returned {type(bad).__name__}, not text" in (result.error or "")


async def test_reply_of_awaits_what_a_plain_function_hands_back() -> None:
    class Deferring:
        def complete(self, *, system: str, user: str) -> Awaitable[str]:
            return ScriptedModel(["deferred"]).complete(system=system, user=user)

    assert await reply_of(Deferring(), system="s", user="u") == "deferred"
    assert await reply_of(ScriptedModel(["async"]), system="s", user="u") == "async"
