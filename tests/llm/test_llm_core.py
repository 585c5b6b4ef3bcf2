"""The provider-neutral LLM layer: messages, scripted provider, retries, structured output."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from scratchpad.errors import LLMError, LLMRateLimitError, LLMTransientError, StructuredOutputError
from scratchpad.llm import (
    Complete,
    ImageBlock,
    Message,
    Response,
    ScriptedProvider,
    TextBlock,
    TextDelta,
    ToolCall,
    ToolResultBlock,
    ToolUseBlock,
    ToolUseEnd,
    ToolUseStart,
    Usage,
    generate_object,
    parse_arguments,
    with_retries,
)


def test_messages_round_trip_through_json() -> None:
    message = Message.user(
        "look",
        ImageBlock("image/png", "iVBOR"),
        ToolResultBlock("call_1", (TextBlock("42"),), is_error=True),
    )
    assert Message.from_dict(json.loads(json.dumps(message.to_dict()))) == message
    reply = Message.assistant("ok", ToolUseBlock("call_2", "scratchpad", {"code": "1"}))
    assert Message.from_dict(reply.to_dict()) == reply
    assert Message.from_dict({"role": "user", "content": "plain"}).text == "plain"
    with pytest.raises(ValueError, match="role"):
        Message.from_dict({"role": "system", "content": "x"})


def test_usage_adds_up() -> None:
    assert Usage(1, 2, 3, 4) + Usage(10, 20, 30, 40) == Usage(11, 22, 33, 44)


async def test_scripted_provider_plays_its_turns_and_records_requests() -> None:
    provider = ScriptedProvider(["hello", [ToolCall("scratchpad", {"code": "1+1"})]])
    first = await provider.complete(system="be brief", messages=[Message.user("hi")])
    assert first.text == "hello" and first.stop_reason == "end_turn"
    second = await provider.complete(system="s", messages=[Message.user("go")], max_tokens=99)
    assert second.stop_reason == "tool_use"
    assert second.tool_calls == (ToolCall("scratchpad", {"code": "1+1"}, "call_2_1"),)
    assert second.content == (ToolUseBlock("call_2_1", "scratchpad", {"code": "1+1"}),)
    assert [r["system"] for r in provider.requests] == ["be brief", "s"]
    assert provider.requests[1]["max_tokens"] == 99
    with pytest.raises(LLMError, match="ran out of turns after 2 replies"):
        await provider.complete(system="", messages=[])


async def test_default_stream_ends_with_complete() -> None:
    provider = ScriptedProvider(["text", [ToolCall("t", {"a": 1}, "c1")]])
    events = [e async for e in provider.stream(system="", messages=[Message.user("x")])]
    assert events[0] == TextDelta("text") and isinstance(events[-1], Complete)
    events = [e async for e in provider.stream(system="", messages=[Message.user("x")])]
    assert [type(e) for e in events[:1] + events[2:]] == [ToolUseStart, ToolUseEnd, Complete]
    assert isinstance(events[-2], ToolUseEnd) and events[-2].call.input == {"a": 1}


@pytest.mark.parametrize(
    ("raw", "expected", "repaired"),
    [
        ('{"a": 1}', {"a": 1}, False),
        ("", {}, False),
        ('{"code": "print(1)', {"code": "print(1)"}, True),
        ('{"a": [1, 2', {"a": [1, 2]}, True),
        ('{"a": 1,}', {"a": 1}, True),
        ('{"a": 1, "b":', {"a": 1}, True),
        ('{"s": "end\\', {"s": "end"}, True),
        ('{"a": {"b": [1, {"c": "d', {"a": {"b": [1, {"c": "d"}]}}, True),
    ],
)
def test_tool_arguments_are_parsed_or_repaired(
    raw: str, expected: dict[str, object], repaired: bool
) -> None:
    parsed = parse_arguments(raw)
    assert (parsed.input, parsed.repaired, parsed.parse_error) == (expected, repaired, None)


@pytest.mark.parametrize(
    ("raw", "message"),
    [("garbage", "not valid JSON"), ("[1, 2]", "must be a JSON object"), ('{"a": 1}}', "JSON")],
)
def test_hopeless_arguments_report_an_error(raw: str, message: str) -> None:
    parsed = parse_arguments(raw)
    assert parsed.input == {} and parsed.parse_error is not None and message in parsed.parse_error


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=4), st.booleans())
def test_any_prefix_of_valid_arguments_parses_to_an_object(
    value: dict[str, object], ascii_only: bool
) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only)
    for cut in range(1, len(raw) + 1):
        parsed = parse_arguments(raw[:cut])
        assert parsed.parse_error is None, raw[:cut]
        assert isinstance(parsed.input, dict)
    assert parse_arguments(raw).input == value


async def test_retries_within_a_budget() -> None:
    attempts: list[int] = []
    waits: list[float] = []

    async def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise LLMTransientError("overloaded")
        return "done"

    async def no_sleep(seconds: float) -> None:
        waits.append(seconds)

    assert await with_retries(flaky, sleep=no_sleep) == "done"
    assert len(attempts) == 3 and len(waits) == 2

    async def always_limited() -> str:
        raise LLMRateLimitError("slow down")

    with pytest.raises(LLMRateLimitError):
        await with_retries(always_limited, budget_s=0.0, sleep=no_sleep)


class City(BaseModel):
    name: str
    population: int


async def test_generate_object_forces_a_tool_and_validates() -> None:
    provider = ScriptedProvider([[ToolCall("submit_city", {"name": "Oslo", "population": 7})]])
    city = await generate_object(provider, City, system="s", messages=[Message.user("?")])
    assert city == City(name="Oslo", population=7)
    request = provider.requests[0]
    assert request["tool_choice"] == {"type": "tool", "name": "submit_city"}
    assert request["tools"][0].input_schema["required"] == ["name", "population"]


async def test_generate_object_list() -> None:
    cities = [{"name": "A", "population": 1}, {"name": "B", "population": 2}]
    provider = ScriptedProvider([[ToolCall("submit_city_list", {"items": cities})]])
    result = await generate_object(provider, list[City], system="", messages=[])
    assert result == [City(name="A", population=1), City(name="B", population=2)]


@pytest.mark.parametrize(
    ("turn", "message"),
    [
        ("just text", "did not call submit_city"),
        ([ToolCall("submit_city", {"name": "X"})], "does not validate"),
        ([ToolCall("submit_city", {}, parse_error="not JSON")], "not trustworthy: not JSON"),
        ([ToolCall("submit_city", {"name": "X", "population": 1}, repaired=True)], "repaired"),
        (
            Response(
                (),
                (ToolCall("submit_city", {"name": "X", "population": 1}, "c"),),
                stop_reason="max_tokens",
            ),
            "max_tokens",
        ),
    ],
)
async def test_generate_object_refuses_bad_calls(turn: object, message: str) -> None:
    provider = ScriptedProvider([turn])  # type: ignore[list-item]
    with pytest.raises(StructuredOutputError, match=message):
        await generate_object(provider, City, system="", messages=[])
