"""The LLM bridge inside a pad: ``get_llm()``, ``agentic_loop()``, ``web_search()``.

Loaded in the kernel on first use (as ``_scratchpad_llm_bridge``); it imports the scratchpad
LLM layer from the host environment, which pads can see. Model calls run on one background
event loop, so clients are reused across calls and ``complete_async`` works in cells that use
top-level ``await``. Long calls report progress every 10 s, so they never trip the cell's
inactivity timeout.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")
HEARTBEAT_S = 10.0

_bridge: PadLLM | None = None


def get_llm(model: str | None = None) -> PadLLM:
    """The pad's model (``SCRATCHPAD_MODEL`` unless ``model`` is given), created once."""
    global _bridge
    if _bridge is None or (model and model != _bridge.spec):
        _bridge = PadLLM(model or os.environ.get("SCRATCHPAD_MODEL", ""))
    return _bridge


def agentic_loop(
    *,
    system: str,
    user_message: str,
    tools: Sequence[dict[str, Any]],
    handle_tool: Callable[[str, dict[str, Any]], str],
    max_turns: int = 10,
) -> str:
    """A small tool-calling loop in a cell: the model calls ``tools`` (name, description,
    input_schema) and ``handle_tool(name, input)`` answers, until it replies in text."""
    return get_llm().run_loop(system, user_message, tools, handle_tool, max_turns)


def web_search(query: str) -> str:
    """Web search through the model provider's native search tool (Anthropic has one)."""
    llm = get_llm()
    search = getattr(llm.provider, "web_search", None)
    if search is None:
        raise RuntimeError(
            f"web_search needs a provider with native web search; {llm.provider.name!r} has "
            "none here. Fetch pages directly (for example with httpx), or use an anthropic model"
        )
    return str(llm.wait(search(query)))


class PadLLM:
    """A synchronous face of a provider for cell code."""

    def __init__(self, spec: str) -> None:
        try:
            from scratchpad.config import Settings
            from scratchpad.llm.adapters import create_provider
        except ImportError as exc:
            raise RuntimeError(
                "the scratchpad package is not importable in this pad, so get_llm() cannot "
                "work; run the pad from an environment where scratchpad is installed"
            ) from exc
        settings = Settings.load()
        self.spec = spec or settings.model
        self.provider = create_provider(self.spec, settings=settings)
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True, name="llm-bridge").start()

    # -- the calls ----------------------------------------------------------------------------
    def complete(self, *, system: str = "", messages: Sequence[Any], max_tokens: int = 4096) -> str:
        """The model's text reply to ``messages`` (dicts with role/content, or Messages)."""
        return self.wait(self._complete(system, messages, max_tokens))

    async def complete_async(
        self, *, system: str = "", messages: Sequence[Any], max_tokens: int = 4096
    ) -> str:
        """Awaitable :meth:`complete`, for ``asyncio.gather`` fan-out in a cell."""
        future = asyncio.run_coroutine_threadsafe(
            self._complete(system, messages, max_tokens), self._loop
        )
        return await asyncio.wrap_future(future)

    def generate_object(
        self, model: Any, *, system: str = "", messages: Sequence[Any], max_tokens: int = 4096
    ) -> Any:
        """A pydantic ``model`` instance (or ``list[Model]``) filled by the model."""
        from scratchpad.llm.structured import generate_object

        coroutine = generate_object(
            self.provider,
            model,
            system=system,
            messages=_messages(messages),
            max_tokens=max_tokens,
        )
        return self.wait(coroutine)

    def run_loop(
        self,
        system: str,
        user_message: str,
        tools: Sequence[dict[str, Any]],
        handle_tool: Callable[[str, dict[str, Any]], str],
        max_turns: int,
    ) -> str:
        from scratchpad.llm.messages import Message, TextBlock, ToolResultBlock, ToolSpec

        specs = [ToolSpec(t["name"], t.get("description", ""), t["input_schema"]) for t in tools]
        history = [Message.user(user_message)]
        for _ in range(max_turns):
            response = self.wait(
                self.provider.complete(system=system, messages=history, tools=specs)
            )
            history.append(response.as_message())
            if not response.tool_calls:
                return response.text
            results = []
            for call in response.tool_calls:
                try:
                    answer, failed = str(handle_tool(call.name, call.input)), False
                except Exception as exc:
                    answer, failed = f"{type(exc).__name__}: {exc}", True
                results.append(ToolResultBlock(call.id, (TextBlock(answer),), failed))
            history.append(Message("user", tuple(results)))
        return f"(stopped after {max_turns} turns without a final answer)"

    # -- plumbing -----------------------------------------------------------------------------
    async def _complete(self, system: str, messages: Sequence[Any], max_tokens: int) -> str:
        response = await self.provider.complete(
            system=system, messages=_messages(messages), max_tokens=max_tokens
        )
        return response.text

    def wait(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run on the bridge loop; progress every 10 s; Ctrl-C/timeout cancels the call."""
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        waited = 0.0
        try:
            while True:
                try:
                    return future.result(timeout=HEARTBEAT_S)
                except TimeoutError:
                    waited += HEARTBEAT_S
                    _progress(f"waiting for the model ({waited:.0f}s)")
        except BaseException:
            future.cancel()
            raise


def _messages(messages: Sequence[Any]) -> list[Any]:
    from scratchpad.llm.messages import Message

    return [m if isinstance(m, Message) else Message.from_dict(m) for m in messages]


def _progress(message: str) -> None:
    import sys

    kernel = getattr(sys.modules.get("_scratchpad_kernel"), "KERNEL", None)
    if kernel is not None:
        kernel.progress(message)
