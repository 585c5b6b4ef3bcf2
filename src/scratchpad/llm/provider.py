"""The provider interface every adapter implements, and retries within a time budget."""

from __future__ import annotations

import asyncio
import json
import random
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from scratchpad.errors import LLMRateLimitError, LLMTransientError
from scratchpad.llm.messages import (
    Complete,
    Message,
    Response,
    StreamEvent,
    TextBlock,
    TextDelta,
    ToolSpec,
    ToolUseBlock,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
)

T = TypeVar("T")
ToolChoice = dict[str, Any]  # {"type": "auto" | "any" | "none"} or {"type": "tool", "name": ...}


class Provider(ABC):
    """A language model behind one API. ``complete`` answers at once; ``stream`` yields events
    and ends with exactly one :class:`Complete`."""

    name: str = "provider"
    model: str = ""

    @abstractmethod
    async def complete(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice | None = None,
        max_tokens: int = 4096,
    ) -> Response:
        """One model reply to the conversation."""

    async def stream(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice | None = None,
        max_tokens: int = 4096,
    ) -> AsyncIterator[StreamEvent]:
        """Events of one reply; adapters with real streaming override this."""
        response = await self.complete(
            system=system,
            messages=messages,
            tools=tools,
            tool_choice=tool_choice,
            max_tokens=max_tokens,
        )
        for event in events_of(response):
            yield event


def events_of(response: Response) -> list[StreamEvent]:
    """The stream a whole response would have produced (text, tool calls, then Complete)."""
    events: list[StreamEvent] = []
    calls = {call.id: call for call in response.tool_calls}
    for block in response.content:
        if isinstance(block, TextBlock) and block.text:
            events.append(TextDelta(block.text))
        elif isinstance(block, ToolUseBlock) and block.id in calls:
            events.append(ToolUseStart(block.id, block.name))
            events.append(ToolUseDelta(block.id, json.dumps(block.input)))
            events.append(ToolUseEnd(calls[block.id]))
    events.append(Complete(response))
    return events


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    budget_s: float = 60.0,
    first_delay_s: float = 0.5,
    max_delay_s: float = 8.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Run ``call``, retrying rate limits and transient failures with jittered exponential
    backoff while the budget lasts; the last error is raised when it is spent."""
    deadline = time.monotonic() + budget_s
    delay = first_delay_s
    while True:
        try:
            return await call()
        except (LLMRateLimitError, LLMTransientError) as exc:
            retry_after = getattr(exc, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after >= 0:
                wait = float(retry_after)  # the server said when: not sooner
            else:
                wait = min(max_delay_s, delay) * (0.5 + random.random() / 2)
            if time.monotonic() + wait > deadline:
                raise
            await sleep(wait)
            delay = min(max_delay_s, delay * 2)
