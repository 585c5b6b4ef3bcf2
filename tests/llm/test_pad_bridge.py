"""The LLM bridge inside a pad, talking to a stub OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from scratchpad.runtime.base import PadLLM, ScratchpadRuntime
from tests.llm.stub_server import Reply, StubServer, stub_server


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
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    )


def tool_call(name: str, arguments: dict[str, object]) -> Reply:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return completion({"content": None, "tool_calls": [call]}, "tool_calls")


STUB_LLM = PadLLM(provider="openai-compatible", model="stub-model")


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubServer]:
    """The stub model server; a pad reaches it once its model is configured (STUB_LLM): pads
    do not inherit the server's model settings."""
    with stub_server() as server:
        monkeypatch.setenv("SCRATCHPAD_MODEL", "openai-compatible:stub-model")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        yield server


async def test_complete_and_fan_out(stub: StubServer, pad: ScratchpadRuntime) -> None:
    await pad.configure_llm(STUB_LLM)
    stub.queue(*(completion({"content": f"answer {i}"}) for i in range(3)))
    cell = await pad.execute(
        "llm = get_llm()\n"
        "first = llm.complete(system='be brief', messages=[{'role': 'user', 'content': 'hi'}])\n"
        "import asyncio\n"
        "more = await asyncio.gather(*(llm.complete_async(messages=[{'role': 'user', "
        "'content': str(i)}]) for i in range(2)))\n"
        "[first, *sorted(more)]"
    )
    assert cell.status == "ok", cell.error
    assert cell.result == "['answer 0', 'answer 1', 'answer 2']"
    body = stub.requests[0]["body"]
    assert body["model"] == "stub-model"
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    ]


async def test_generate_object_and_agentic_loop(stub: StubServer, pad: ScratchpadRuntime) -> None:
    await pad.configure_llm(STUB_LLM)
    stub.queue(
        tool_call("submit_city", {"name": "Oslo", "population": 700000}),
        tool_call("lookup", {"key": "x"}),
        completion({"content": "x is 42"}),
    )
    cell = await pad.execute(
        "from pydantic import BaseModel\n"
        "class City(BaseModel):\n"
        "    name: str\n"
        "    population: int\n"
        "city = get_llm().generate_object(City, messages=[{'role': 'user', 'content': 'Oslo'}])\n"
        "answer = agentic_loop(system='s', user_message='what is x?', handle_tool=lambda n, i: "
        "'42', tools=[{'name': 'lookup', 'description': 'look up', 'input_schema': "
        "{'type': 'object', 'properties': {'key': {'type': 'string'}}}}])\n"
        "(city.population, answer)"
    )
    assert cell.status == "ok", cell.error
    assert cell.result == "(700000, 'x is 42')"
    loop_second_request = stub.requests[2]["body"]["messages"]
    assert loop_second_request[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "42"}


async def test_the_bridge_is_not_loaded_until_used(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute(
        "import sys\n"
        "(callable(get_llm), '_scratchpad_llm_bridge' in sys.modules, 'openai' in sys.modules)"
    )
    assert cell.result == "(True, False, False)"


async def test_without_a_model_the_error_says_what_to_set(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute("get_llm('openai-compatible:x')")
    assert cell.status == "error"
    assert "OPENAI_BASE_URL" in (cell.error or "")


async def test_web_search_without_native_support_is_explained(
    stub: StubServer, pad: ScratchpadRuntime
) -> None:
    await pad.configure_llm(STUB_LLM)
    cell = await pad.execute("web_search('news')")
    assert cell.status == "error"
    assert "needs a provider with native web search" in (cell.error or "")
    antons = await pad.execute("web_search('news', max_tokens=500)")  # as Anton's cells call it
    assert "needs a provider with native web search" in (antons.error or "")


async def test_long_model_calls_report_progress(stub: StubServer, pad: ScratchpadRuntime) -> None:
    await pad.configure_llm(STUB_LLM)
    reply = completion({"content": "slow answer"})
    reply.delay_s = 0.8
    stub.queue(reply)
    cell = await pad.execute(
        "import _scratchpad_llm_bridge as bridge\n"
        "bridge.HEARTBEAT_S = 0.2  # instead of 10 s\n"
        "get_llm().complete(messages=[{'role': 'user', 'content': 'think'}])"
    )
    assert cell.result == "'slow answer'"
    assert "waiting for the model" in cell.logs


async def test_cells_written_for_antons_pads_work_unchanged(
    stub: StubServer, pad: ScratchpadRuntime
) -> None:
    """Anton's get_llm(): ``complete`` answers an object with ``.content`` and ``.tool_calls``
    and takes ``tools=`` / ``tool_choice=``; the model has ``.model``; ``agentic_loop`` takes
    ``max_tokens=``. Its own loop feeds tool results back as Anthropic-style dicts."""
    await pad.configure_llm(STUB_LLM)
    stub.queue(
        tool_call("lookup", {"key": "x"}),
        completion({"content": "x is 42"}),
        completion({"content": "done"}),
    )
    cell = await pad.execute(
        "llm = get_llm()\n"
        "tools = [{'name': 'lookup', 'description': 'look up', 'input_schema': "
        "{'type': 'object', 'properties': {'key': {'type': 'string'}}}}]\n"
        "messages = [{'role': 'user', 'content': 'what is x?'}]\n"
        "r = llm.complete(system='s', messages=messages, tools=tools, "
        "tool_choice={'type': 'tool', 'name': 'lookup'}, max_tokens=100)\n"
        "call = r.tool_calls[0]\n"
        "messages += [{'role': 'assistant', 'content': [{'type': 'tool_use', 'id': call.id, "
        "'name': call.name, 'input': call.input}]}, {'role': 'user', 'content': "
        "[{'type': 'tool_result', 'tool_use_id': call.id, 'content': '42'}]}]\n"
        "final = llm.complete(system='s', messages=messages, tools=tools)\n"
        "loop = agentic_loop(system='s', user_message='go', tools=tools, "
        "handle_tool=lambda n, i: '', max_tokens=77)\n"
        "(llm.model, call.name, call.input, r.content, final.content, final == 'x is 42', "
        "final + '!', final.stop_reason, loop)"
    )
    assert cell.status == "ok", cell.error
    assert cell.result == (
        "('stub-model', 'lookup', {'key': 'x'}, '', 'x is 42', True, 'x is 42!', 'end_turn', "
        "'done')"
    )
    first, second, third = (request["body"] for request in stub.requests)
    assert first["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    assert first["tools"][0]["function"]["name"] == "lookup"
    assert first["max_tokens"] == 100
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "42"}
    assert third["max_tokens"] == 77


async def test_a_reply_survives_as_text_where_text_is_expected(
    stub: StubServer, pad: ScratchpadRuntime
) -> None:
    await pad.configure_llm(STUB_LLM)
    stub.queue(completion({"content": "hello"}))
    cell = await pad.execute(
        "import json, pickle\n"
        "r = get_llm().complete(messages=[{'role': 'user', 'content': 'hi'}])\n"
        "back = pickle.loads(pickle.dumps(r))\n"
        "(json.dumps(r), r.upper(), isinstance(r, str), back.content, back.model)"
    )
    assert cell.status == "ok", cell.error
    assert cell.result == "('\"hello\"', 'HELLO', True, 'hello', 'stub-model')"
