"""The model seam: the scripted model, the provider adapter, and specs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scratchpad.errors import ConfigError, LLMError
from scratchpad.llm.messages import TextBlock
from scratchpad.llm.scripted import ScriptedProvider
from scratchpad.memory import Model, ProviderModel, ScriptedModel, model_from_spec
from tests.memory.helpers import make_agent, reply


def test_scripted_model_replies_in_order_and_records_prompts() -> None:
    model = ScriptedModel(["one", "two"])
    assert model.complete(system="s1", user="u1") == "one"
    assert model.complete(system="s2", user="u2") == "two"
    assert model.prompts == [("s1", "u1"), ("s2", "u2")]
    with pytest.raises(LLMError, match="ran out of replies after 2"):
        model.complete(system="s", user="u")
    assert isinstance(model, Model)


def test_scripted_model_raises_an_exception_in_its_turn() -> None:
    model = ScriptedModel([ValueError("bad turn"), "after"])
    with pytest.raises(ValueError, match="bad turn"):
        model.complete(system="", user="")
    assert model.complete(system="", user="") == "after"


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


def test_model_from_spec_reads_a_scripted_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["plain text", {"tool": "done", "args": {}}]))
    model = model_from_spec(f"scripted:{script}")
    assert isinstance(model, ScriptedModel)
    assert model.replies == ["plain text", '{"tool": "done", "args": {}}']  # objects as JSON
    assert model.complete(system="", user="") == "plain text"
    assert json.loads(model.complete(system="", user="")) == {"tool": "done", "args": {}}


def test_model_from_spec_refuses_an_unknown_provider() -> None:
    with pytest.raises(ConfigError, match="provider:model"):
        model_from_spec("nonsense")


def test_provider_model_sends_one_user_message_and_returns_text() -> None:
    provider = ScriptedProvider(["first reply", "second reply"])
    with ProviderModel(provider, max_tokens=123) as model:
        assert model.complete(system="rules", user="prompt 1") == "first reply"
        assert model.complete(system="rules", user="prompt 2") == "second reply"
    request = provider.requests[1]
    assert request["system"] == "rules" and request["max_tokens"] == 123
    [message] = request["messages"]
    assert message.role == "user" and message.content == (TextBlock("prompt 2"),)


def test_a_cycle_runs_on_a_provider(tmp_path: Path) -> None:
    provider = ScriptedProvider([reply("echo", text="via provider"), reply("done", summary="p")])
    with ProviderModel(provider) as model:
        agent, _ = make_agent(tmp_path, [])
        agent.model = model
        result = agent.run()
    assert result.outcome == "done" and result.summary == "p"
    assert "Your state:" in provider.requests[0]["messages"][0].text
