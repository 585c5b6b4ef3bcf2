"""``scratchpad chat`` against a stub OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scratchpad.cli.app import app
from tests.llm.stub_server import Reply, stub_server

runner = CliRunner()


def completion(message: dict[str, object], finish: str = "stop") -> Reply:
    return Reply(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
            ],
        }
    )


def sse(*deltas: dict[str, object], finish: str = "stop") -> Reply:
    chunks = [
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        }
        for delta in deltas
    ]
    chunks.append(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
        }
    )
    return Reply(events=[(None, chunk) for chunk in chunks] + [(None, "[DONE]")])


def test_a_chat_works_in_the_pads_that_exec_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    assert runner.invoke(app, ["exec", "main", "answer = 6 * 7"]).exit_code == 0
    with stub_server() as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{stub.url}/v1")
        arguments = json.dumps({"action": "exec", "name": "main", "code": "print(answer)"})
        stub.queue(
            sse(
                {"content": "Let me look."},  # no newline: the tool's lines start their own
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "scratchpad", "arguments": arguments},
                        }
                    ]
                },
                finish="tool_calls",
            ),
            sse({"content": "The answer is "}, {"content": "42."}),
        )
        result = runner.invoke(
            app, ["chat", "--model", "openai-compatible:m"], input="what is 6*7?\n/exit\n"
        )
    assert result.exit_code == 0, result.stderr
    assert "Let me look.\nThe answer is 42." in result.stdout
    assert "› scratchpad: print(answer)" in result.stderr
    assert "  ‹ scratchpad ok\n    [output]\n    42\n" in result.stderr  # the result's text
    tool_message = stub.requests[1]["body"]["messages"][-1]
    assert tool_message == {"role": "tool", "tool_call_id": "call_1", "content": "[output]\n42"}


def test_without_a_key_it_says_what_to_set() -> None:
    result = runner.invoke(app, ["chat", "--model", "anthropic:claude-x"], input="")
    assert result.exit_code == 2
    assert "ANTHROPIC_API_KEY" in result.stderr


def test_a_bad_model_spec_is_explained() -> None:
    result = runner.invoke(app, ["chat", "--model", "gpt4"], input="")
    assert result.exit_code == 2
    assert "provider:model" in result.stderr


def test_a_chat_on_a_scripted_model(tmp_path: Path) -> None:
    """``scripted:FILE`` plays a JSON script in the chat, without a key or a stub server."""
    code = {"action": "exec", "name": "main", "code": "print(6 * 7)"}
    path = tmp_path / "script.json"
    path.write_text(json.dumps([[{"name": "scratchpad", "input": code}], "It is 42."]))
    result = runner.invoke(app, ["chat", "--model", f"scripted:{path}"], input="6*7?\n/exit\n")
    assert result.exit_code == 0, result.stderr
    assert f"scripted:{path}" in result.stdout.replace("\n", "")  # the banner names the script
    assert "It is 42." in result.stdout
    assert "  ‹ scratchpad ok\n    [output]\n    42\n" in result.stderr


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
def test_credential_form_blocks_are_left_out_of_the_streamed_text(size: int) -> None:
    from scratchpad.cli.chat import FormBlocks

    text = (
        'Fill this in:\n```data-vault-form\n{"engine": "x"}\n```\nThen `a` and\n'
        "```python\nprint(1)\n```\n~~~data-vault-form-patch\n{}\n~~~\nend"
    )
    blocks = FormBlocks()
    out = "".join(blocks.feed(text[i : i + size]) for i in range(0, len(text), size))
    out += blocks.flush()
    assert out == "Fill this in:\nThen `a` and\n```python\nprint(1)\n```\nend"


def test_a_failed_turn_is_reported_and_the_chat_exits_non_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with stub_server() as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{stub.url}/v1")
        stub.queue(
            Reply({"error": {"message": "model not found", "type": "invalid_request"}}, 404),
            sse({"content": "Still here."}),
        )
        result = runner.invoke(
            app, ["chat", "--model", "openai-compatible:m"], input="hi\nagain\n/exit\n"
        )
    assert "error:" in result.stderr and "model not found" in result.stderr
    assert "Still here." in result.stdout  # the chat went on after the failed turn
    assert result.exit_code == 1
