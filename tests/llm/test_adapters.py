"""The Anthropic and OpenAI adapters through the official SDKs, against a local stub server."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest

from scratchpad.config import Settings
from scratchpad.errors import (
    ConfigError,
    LLMAuthError,
    LLMContextOverflowError,
    LLMModelUnavailableError,
    LLMRateLimitError,
)
from scratchpad.llm import (
    Complete,
    ImageBlock,
    Message,
    TextBlock,
    TextDelta,
    ToolCall,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    ToolUseEnd,
    ToolUseStart,
    Usage,
)
from scratchpad.llm.adapters import create_provider, parse_model_spec
from scratchpad.llm.adapters.anthropic import AnthropicProvider
from scratchpad.llm.adapters.openai import OpenAIProvider
from tests.llm.stub_server import Reply, StubServer, stub_server

TOOLS = [ToolSpec("scratchpad", "run code", {"type": "object", "properties": {}})]
CONVERSATION = [
    Message.user("plot it", ImageBlock("image/png", "iVBOR")),
    Message.assistant("sure", ToolUseBlock("t1", "scratchpad", {"code": "1"})),
    Message.user(ToolResultBlock("t1", (TextBlock("[result]\n1"),), is_error=False)),
]


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with stub_server() as server:
        yield server


def anthropic(stub: StubServer) -> AnthropicProvider:
    return AnthropicProvider("claude-test", api_key="sk-test", base_url=stub.url, retry_budget_s=5)


def openai(stub: StubServer, compatible: bool = False) -> OpenAIProvider:
    return OpenAIProvider(
        "gpt-test",
        api_key="sk-test",
        base_url=f"{stub.url}/v1",
        compatible=compatible,
        retry_budget_s=5,
    )


def anthropic_message(content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 7, "cache_read_input_tokens": 3},
    }


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


async def test_anthropic_complete_with_tools_and_images(stub: StubServer) -> None:
    stub.queue(
        Reply(
            anthropic_message(
                [
                    {"type": "text", "text": "running"},
                    {
                        "type": "tool_use",
                        "id": "toolu_2",
                        "name": "scratchpad",
                        "input": {"code": "2"},
                    },
                ],
                "tool_use",
            )
        )
    )
    response = await anthropic(stub).complete(
        system="be brief",
        messages=CONVERSATION,
        tools=TOOLS,
        tool_choice={"type": "auto"},
        max_tokens=100,
    )
    assert response.text == "running"
    assert response.tool_calls == (ToolCall("scratchpad", {"code": "2"}, "toolu_2"),)
    assert response.stop_reason == "tool_use"
    assert response.usage == Usage(12, 7, 3, 0)
    sent = stub.requests[0]
    assert sent["path"] == "/v1/messages"
    headers = sent["headers"]
    assert "sk-test" in headers.get("x-api-key", "") + headers.get("authorization", "")
    body = sent["body"]
    assert body["system"] == "be brief" and body["max_tokens"] == 100
    assert body["tools"][0]["input_schema"] == {"type": "object", "properties": {}}
    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"},
    }
    assert body["messages"][2]["content"][0]["type"] == "tool_result"


async def test_anthropic_streaming(stub: StubServer) -> None:
    start = {"type": "message_start", "message": {**anthropic_message([]), "stop_reason": None}}
    stub.queue(
        Reply(
            events=[
                ("message_start", start),
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": "Hel"},
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": "lo"},
                    },
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 1,
                        "content_block": {
                            "type": "tool_use",
                            "id": "toolu_9",
                            "name": "scratchpad",
                            "input": {},
                        },
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": '{"code": "pri'},
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": 'nt(1)"}'},
                    },
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 1}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {
                            "type": "message_delta",
                            "stop_reason": "tool_use",
                            "stop_sequence": None,
                        },
                        "usage": {"output_tokens": 21},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        )
    )
    events = [e async for e in anthropic(stub).stream(system="", messages=[Message.user("hi")])]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo"]
    assert ToolUseStart("toolu_9", "scratchpad") in events
    ends = [e for e in events if isinstance(e, ToolUseEnd)]
    assert ends[0].call == ToolCall("scratchpad", {"code": "print(1)"}, "toolu_9")
    final = events[-1]
    assert isinstance(final, Complete)
    assert final.response.text == "Hello" and final.response.stop_reason == "tool_use"
    assert final.response.usage.output_tokens == 21
    assert stub.requests[0]["body"]["stream"] is True


@pytest.mark.parametrize(
    ("status", "body", "error", "message"),
    [
        (
            401,
            anthropic_error("authentication_error", "invalid x-api-key"),
            LLMAuthError,
            "ANTHROPIC_API_KEY",
        ),
        (
            404,
            anthropic_error("not_found_error", "model: nope"),
            LLMModelUnavailableError,
            "claude-test",
        ),
        (
            400,
            anthropic_error("invalid_request_error", "prompt is too long: 300000 tokens"),
            LLMContextOverflowError,
            "too long",
        ),
    ],
)
async def test_anthropic_errors_map_to_the_tree(
    stub: StubServer, status: int, body: dict[str, Any], error: type[Exception], message: str
) -> None:
    stub.queue(Reply(body, status))
    with pytest.raises(error, match=message):
        await anthropic(stub).complete(system="", messages=[Message.user("hi")])


async def test_anthropic_transient_errors_are_retried(stub: StubServer) -> None:
    stub.queue(
        Reply(anthropic_error("overloaded_error", "Overloaded"), 529),
        Reply(anthropic_message([{"type": "text", "text": "fine"}])),
    )
    response = await anthropic(stub).complete(system="", messages=[Message.user("hi")])
    assert response.text == "fine" and len(stub.requests) == 2


async def test_anthropic_rate_limit_outlasting_the_budget(stub: StubServer) -> None:
    provider = anthropic(stub)
    provider.retry_budget_s = 0
    stub.queue(Reply(anthropic_error("rate_limit_error", "slow down"), 429))
    with pytest.raises(LLMRateLimitError, match="slow down"):
        await provider.complete(system="", messages=[Message.user("hi")])


def openai_completion(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": {
            "prompt_tokens": 9,
            "completion_tokens": 4,
            "total_tokens": 13,
            "prompt_tokens_details": {"cached_tokens": 2},
        },
    }


async def test_openai_complete_with_tools(stub: StubServer) -> None:
    stub.queue(
        Reply(
            openai_completion(
                {
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "scratchpad", "arguments": '{"code": "3"'},
                        },  # cut off
                    ],
                },
                "tool_calls",
            )
        )
    )
    response = await openai(stub).complete(
        system="sys",
        messages=CONVERSATION,
        tools=TOOLS,
        tool_choice={"type": "tool", "name": "scratchpad"},
        max_tokens=50,
    )
    call = response.tool_calls[0]
    assert (call.name, call.input, call.repaired) == ("scratchpad", {"code": "3"}, True)
    assert response.stop_reason == "tool_use" and response.usage == Usage(9, 4, 2, 0)
    body = stub.requests[0]["body"]
    assert stub.requests[0]["path"] == "/v1/chat/completions"
    assert body["max_completion_tokens"] == 50
    assert body["tool_choice"] == {"type": "function", "function": {"name": "scratchpad"}}
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert body["messages"][1]["content"][1]["image_url"]["url"] == "data:image/png;base64,iVBOR"
    assert body["messages"][2]["tool_calls"][0]["function"] == {
        "name": "scratchpad",
        "arguments": '{"code": "1"}',
    }
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "t1", "content": "[result]\n1"}


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


async def test_openai_compatible_streaming(stub: StubServer) -> None:
    usage = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11},
    }
    stub.queue(
        Reply(
            events=[
                (None, chunk({"role": "assistant", "content": "Hi"})),
                (None, chunk({"content": " there"})),
                (
                    None,
                    chunk(
                        {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_7",
                                    "type": "function",
                                    "function": {"name": "scratchpad", "arguments": ""},
                                }
                            ]
                        }
                    ),
                ),
                (
                    None,
                    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"code":'}}]}),
                ),
                (None, chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "4"}'}}]})),
                (None, chunk({}, "tool_calls")),
                (None, usage),
                (None, "[DONE]"),
            ]
        )
    )
    provider = openai(stub, compatible=True)
    events = [e async for e in provider.stream(system="", messages=[Message.user("hi")])]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hi", " there"]
    final = events[-1]
    assert isinstance(final, Complete)
    assert final.response.text == "Hi there"
    assert final.response.tool_calls == (ToolCall("scratchpad", {"code": "4"}, "call_7"),)
    assert final.response.usage == Usage(5, 6, 0, 0)
    assert stub.requests[0]["body"]["max_tokens"] == 4096  # compatible servers take max_tokens
    assert provider.name == "openai-compatible"


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (
            401,
            {
                "error": {
                    "message": "Incorrect API key",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
            LLMAuthError,
        ),
        (
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 8192 tokens",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            },
            LLMContextOverflowError,
        ),
    ],
)
async def test_openai_errors_map_to_the_tree(
    stub: StubServer, status: int, body: dict[str, Any], error: type[Exception]
) -> None:
    stub.queue(Reply(body, status))
    with pytest.raises(error):
        await openai(stub).complete(system="", messages=[Message.user("hi")])


def test_model_specs_and_missing_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_model_spec("openai-compatible:llama3") == ("openai-compatible", "llama3")
    with pytest.raises(ConfigError, match="SCRATCHPAD_MODEL"):
        parse_model_spec("claude")
    with pytest.raises(LLMAuthError, match="ANTHROPIC_API_KEY"):
        create_provider("anthropic:claude-x", settings=Settings())
    with pytest.raises(ConfigError, match="OPENAI_BASE_URL"):
        create_provider("openai-compatible:llama3", settings=Settings())
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    provider = create_provider("openai-compatible:llama3", settings=Settings())
    assert (provider.name, provider.model) == ("openai-compatible", "llama3")


async def test_anthropic_native_web_search(stub: StubServer) -> None:
    stub.queue(
        Reply(
            anthropic_message(
                [
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_1",
                        "name": "web_search",
                        "input": {"query": "python 3.14"},
                    },
                    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                    {
                        "type": "text",
                        "text": "Python 3.14 is out.",
                        "citations": [
                            {
                                "type": "web_search_result_location",
                                "url": "https://python.org",
                                "title": "Python",
                                "encrypted_index": "x",
                                "cited_text": "3.14",
                            }
                        ],
                    },
                ]
            )
        )
    )
    answer = await anthropic(stub).web_search("python 3.14")
    assert answer == "Python 3.14 is out. [Python](https://python.org)"
    assert stub.requests[0]["body"]["tools"] == [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    ]


@pytest.mark.parametrize(
    ("spec", "module", "extra"),
    [
        ("anthropic:m", "anthropic", "scratchpad[anthropic]"),
        ("openai:m", "openai", "scratchpad[openai]"),
    ],
)
def test_a_missing_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, spec: str, module: str, extra: str
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, module, None)  # makes `import <module>` fail
    with pytest.raises(ConfigError, match=re.escape(extra)):
        create_provider(spec, settings=Settings())


async def test_parallel_calls_that_share_an_index_stay_apart(stub: StubServer) -> None:
    def part(call_id: str, arguments: str) -> dict[str, Any]:
        return {
            "tool_calls": [
                {
                    "index": 0,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "scratchpad", "arguments": arguments},
                }
            ]
        }

    stub.queue(
        Reply(
            events=[
                (None, chunk(part("call_a", '{"code": "1"}'))),
                (None, chunk(part("call_b", '{"code": "2"}'))),
                (None, chunk({}, "tool_calls")),
                (None, "[DONE]"),
            ]
        )
    )
    events = [e async for e in openai(stub, True).stream(system="", messages=[Message.user("x")])]
    final = events[-1]
    assert isinstance(final, Complete)
    assert final.response.tool_calls == (
        ToolCall("scratchpad", {"code": "1"}, "call_a"),
        ToolCall("scratchpad", {"code": "2"}, "call_b"),
    )


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_a_provider_serves_one_event_loop_after_another(kind: str) -> None:
    """Each agent cycle runs on a new event loop: the provider's client of the closed loop
    (its kept-alive connection) is not reused, so no request fails and is retried."""
    with stub_server(keep_alive=True) as server:
        if kind == "anthropic":
            body = anthropic_message([{"type": "text", "text": "hi"}])
            provider: AnthropicProvider | OpenAIProvider = anthropic(server)
        else:
            body = openai_completion({"role": "assistant", "content": "hi"})
            provider = openai(server)
        server.queue(*(Reply(body) for _ in range(4)))
        for _ in range(3):
            with asyncio.Runner() as runner:
                reply = runner.run(provider.complete(system="", messages=[Message.user("x")]))
            assert reply.text == "hi"
        assert len(server.requests) == 3
