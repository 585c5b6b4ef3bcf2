"""Anthropic Messages API adapter (official ``anthropic`` SDK, imported on first use)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from scratchpad.errors import (
    LLMAuthError,
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
    ToolSpec,
    ToolUseBlock,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    Usage,
)
from scratchpad.llm.provider import ToolChoice
from scratchpad.llm.toolargs import tool_call

WEB_SEARCH_TOOL = "web_search_20250305"
STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
}


class AnthropicProvider(SDKProvider):
    name = "anthropic"
    key_variable = "ANTHROPIC_API_KEY"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 600.0,
        retry_budget_s: float = 60.0,
    ) -> None:
        anthropic = import_sdk("anthropic")
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise LLMAuthError("no Anthropic API key: set ANTHROPIC_API_KEY")
        self.model = model
        self.retry_budget_s = retry_budget_s
        self._sdk = anthropic
        self._options = {"api_key": key, "base_url": base_url, "timeout": timeout_s}

    def _new_client(self) -> Any:
        return self._sdk.AsyncAnthropic(**self._options, max_retries=0)

    def _params(
        self,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        tool_choice: ToolChoice | None,
        max_tokens: int,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": [
                {"role": m.role, "content": [_wire_block(b) for b in m.content]} for m in messages
            ],
        }
        if system:
            params["system"] = system
        if tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in tools
            ]
            if tool_choice:
                params["tool_choice"] = tool_choice
        return params

    async def _create(self, params: dict[str, Any], *, stream: bool) -> Any:
        if stream:
            return await self._client.messages.create(**params, stream=True)
        return await self._client.messages.create(**params)

    def _response(self, reply: Any) -> Response:
        return _response(reply)

    def _builder(self) -> _StreamBuilder:
        return _StreamBuilder()

    async def web_search(self, query: str, *, max_uses: int = 3, max_tokens: int = 2048) -> str:
        """Search the web with Anthropic's server-side web search tool; the cited answer."""
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": query}],
            "tools": [{"type": WEB_SEARCH_TOOL, "name": "web_search", "max_uses": max_uses}],
        }

        return _cited_text(await self._send(params, stream=False))


def _cited_text(reply: Any) -> str:
    """Text blocks of a web-search reply, with the URLs they cite listed after each."""
    parts: list[str] = []
    for block in reply.content:
        if getattr(block, "type", "") != "text":
            continue
        parts.append(block.text)
        for citation in getattr(block, "citations", None) or []:
            url = getattr(citation, "url", None)
            if url:
                parts.append(f" [{getattr(citation, 'title', '') or url}]({url})")
    return "".join(parts).strip()


def _wire_block(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        source = {"type": "base64", "media_type": block.media_type, "data": block.data}
        return {"type": "image", "source": source}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": [_wire_block(part) for part in block.content],
        "is_error": block.is_error,
    }


def _response(reply: Any) -> Response:
    blocks: list[Block] = []
    calls: list[ToolCall] = []
    for item in reply.content:
        if item.type == "text" and item.text:
            blocks.append(TextBlock(item.text))
        elif item.type == "tool_use":
            tool_input = item.input if isinstance(item.input, dict) else {}
            blocks.append(ToolUseBlock(item.id, item.name, tool_input))
            calls.append(ToolCall(item.name, tool_input, item.id))
    return Response(tuple(blocks), tuple(calls), _usage(reply.usage), _stop(reply.stop_reason))


def _usage(usage: Any) -> Usage:
    return Usage(
        getattr(usage, "input_tokens", 0) or 0,
        getattr(usage, "output_tokens", 0) or 0,
        getattr(usage, "cache_read_input_tokens", 0) or 0,
        getattr(usage, "cache_creation_input_tokens", 0) or 0,
    )


def _stop(reason: str | None) -> StopReason:
    return STOP_REASONS.get(reason or "", "other")


class _StreamBuilder:
    """Assembles a Response from Messages API stream events, emitting neutral events."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.usage = Usage()
        self.stop: StopReason = "end_turn"

    def feed(self, event: Any) -> list[StreamEvent]:
        kind = event.type
        if kind == "message_start":
            self.usage = _usage(event.message.usage)
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                self.blocks[event.index] = {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "json": "",
                }
                return [ToolUseStart(block.id, block.name)]
            self.blocks[event.index] = {"type": "text", "text": getattr(block, "text", "")}
        elif kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif kind == "content_block_stop":
            block = self.blocks.get(event.index)
            if block and block["type"] == "tool_use":
                return [ToolUseEnd(self._call(block))]
        elif kind == "message_delta":
            self.stop = _stop(event.delta.stop_reason)
            output = getattr(event.usage, "output_tokens", 0) or 0
            self.usage = Usage(
                self.usage.input_tokens,
                output,
                self.usage.cache_read_tokens,
                self.usage.cache_write_tokens,
            )
        return []

    def _delta(self, index: int, delta: Any) -> list[StreamEvent]:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        if delta.type == "text_delta":
            block["text"] += delta.text
            return [TextDelta(delta.text)]
        if delta.type == "input_json_delta":
            block["json"] += delta.partial_json
            return [ToolUseDelta(block["id"], delta.partial_json)]
        return []

    @staticmethod
    def _call(block: dict[str, Any]) -> ToolCall:
        return tool_call(block["name"], block["json"], block["id"])

    def finish(self) -> list[StreamEvent]:
        return []  # tool calls ended with their content blocks

    def response(self) -> Response:
        blocks: list[Block] = []
        calls: list[ToolCall] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block["type"] == "text":
                if block["text"]:
                    blocks.append(TextBlock(block["text"]))
            else:
                call = self._call(block)
                calls.append(call)
                blocks.append(ToolUseBlock(call.id, call.name, call.input))
        return Response(tuple(blocks), tuple(calls), self.usage, self.stop)
