"""OpenAI Chat Completions adapter (official ``openai`` SDK, imported on first use).

The same class serves any OpenAI-compatible server (vLLM, Ollama, llama.cpp) through
``base_url``; such servers often need no real key.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from scratchpad.errors import (
    ConfigError,
    LLMAuthError,
    LLMError,
)
from scratchpad.llm.adapters.base import SDKProvider, import_sdk
from scratchpad.llm.messages import (
    Block,
    ImageBlock,
    Message,
    Response,
    StopReason,
    StreamEvent,
    TextBlock,
    TextDelta,
    ToolCall,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    Usage,
)
from scratchpad.llm.provider import ToolChoice
from scratchpad.llm.toolargs import tool_call

FINISH_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


class OpenAIProvider(SDKProvider):
    name = "openai"
    key_variable = "OPENAI_API_KEY"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        compatible: bool = False,
        timeout_s: float = 600.0,
        retry_budget_s: float = 60.0,
    ) -> None:
        openai = import_sdk("openai")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if compatible and not base_url:
            raise ConfigError("an OpenAI-compatible model needs a server: set OPENAI_BASE_URL")
        if not key:
            if not compatible:
                raise LLMAuthError("no OpenAI API key: set OPENAI_API_KEY")
            key = "not-needed"  # local servers usually accept any key
        self.name = "openai-compatible" if compatible else "openai"
        self.model = model
        self.compatible = compatible
        self.retry_budget_s = retry_budget_s
        self._sdk = openai
        self._options = {"api_key": key, "base_url": base_url, "timeout": timeout_s}

    def _new_client(self) -> Any:
        return self._sdk.AsyncOpenAI(**self._options, max_retries=0)

    def _params(
        self,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        tool_choice: ToolChoice | None,
        max_tokens: int,
    ) -> dict[str, Any]:
        wire: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        for message in messages:
            wire.extend(_wire_messages(message))
        params: dict[str, Any] = {"model": self.model, "messages": wire}
        params["max_tokens" if self.compatible else "max_completion_tokens"] = max_tokens
        if tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                }
                for t in tools
            ]
            if tool_choice:
                params["tool_choice"] = _wire_tool_choice(tool_choice)
        return params

    async def _create(self, params: dict[str, Any], *, stream: bool) -> Any:
        if stream:
            return await self._client.chat.completions.create(
                **params, stream=True, stream_options={"include_usage": True}
            )
        return await self._client.chat.completions.create(**params)

    def _response(self, reply: Any) -> Response:
        return _response(reply)

    def _builder(self) -> _StreamBuilder:
        return _StreamBuilder()


def _wire_tool_choice(choice: ToolChoice) -> Any:
    kind = choice.get("type")
    if kind == "tool":
        return {"type": "function", "function": {"name": choice["name"]}}
    return {"any": "required", "none": "none"}.get(str(kind), "auto")


def _wire_messages(message: Message) -> list[dict[str, Any]]:
    """One neutral message as Chat Completions messages (tool results become role 'tool')."""
    if message.role == "assistant":
        calls = [b for b in message.content if isinstance(b, ToolUseBlock)]
        wire: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        if calls:
            wire["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.input)},
                }
                for c in calls
            ]
        return [wire]
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            text = "\n".join(p.text for p in block.content if isinstance(p, TextBlock))
            prefix = "[error] " if block.is_error else ""
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": block.tool_use_id,
                    "content": prefix + (text or "(no text)"),
                }
            )
            images.extend(_image_part(p) for p in block.content if isinstance(p, ImageBlock))
        elif isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            parts.append(_image_part(block))
    parts = images + parts  # tool messages hold text only: their images follow as user content
    if parts:
        out.append({"role": "user", "content": parts})
    return out


def _image_part(block: ImageBlock) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{block.media_type};base64,{block.data}"},
    }


def _response(reply: Any) -> Response:
    if not reply.choices:
        raise LLMError("the server answered without any choice")
    choice = reply.choices[0]
    blocks: list[Block] = []
    if choice.message.content:
        blocks.append(TextBlock(choice.message.content))
    calls = [
        tool_call(c.function.name, c.function.arguments, c.id)
        for c in (choice.message.tool_calls or [])
    ]
    blocks.extend(ToolUseBlock(c.id, c.name, c.input) for c in calls)
    stop = FINISH_REASONS.get(choice.finish_reason or "", "other")
    return Response(tuple(blocks), tuple(calls), _usage(reply.usage), stop)


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", 0) if details is not None else 0
    return Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0, cached or 0, 0)


class _StreamBuilder:
    """Assembles a Response from Chat Completions chunks, emitting neutral events."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: list[dict[str, str]] = []  # in the order they started
        self.by_index: dict[int, dict[str, str]] = {}
        self.usage = Usage()
        self.stop: StopReason = "end_turn"

    def feed(self, chunk: Any) -> list[StreamEvent]:
        if getattr(chunk, "usage", None) is not None:
            self.usage = _usage(chunk.usage)
        events: list[StreamEvent] = []
        for choice in chunk.choices or []:
            delta = choice.delta
            if delta.content:
                self.text.append(delta.content)
                events.append(TextDelta(delta.content))
            for part in delta.tool_calls or []:
                events.extend(self._tool_delta(part))
            if choice.finish_reason:
                self.stop = FINISH_REASONS.get(choice.finish_reason, "other")
        return events

    def _tool_delta(self, part: Any) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        call = self.by_index.get(part.index)
        if call is None or (part.id and part.id != call["id"]):  # some servers reuse index 0
            call = {"id": part.id or f"call_{len(self.calls)}", "name": "", "arguments": ""}
            self.by_index[part.index] = call
            self.calls.append(call)
        function = part.function
        if function is not None and function.name:
            call["name"] += function.name
        if not call.get("started") and call["name"]:
            call["started"] = "yes"
            events.append(ToolUseStart(call["id"], call["name"]))
        if function is not None and function.arguments:
            call["arguments"] += function.arguments
            events.append(ToolUseDelta(call["id"], function.arguments))
        return events

    def finish(self) -> list[StreamEvent]:
        return [ToolUseEnd(call) for call in self._calls()]

    def _calls(self) -> list[ToolCall]:
        return [tool_call(c["name"], c["arguments"], c["id"]) for c in self.calls]

    def response(self) -> Response:
        calls = self._calls()
        blocks: list[Block] = [TextBlock("".join(self.text))] if self.text else []
        blocks.extend(ToolUseBlock(c.id, c.name, c.input) for c in calls)
        return Response(tuple(blocks), tuple(calls), self.usage, self.stop)
