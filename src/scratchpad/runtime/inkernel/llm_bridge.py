"""The LLM bridge inside a pad: ``get_llm()``, ``agentic_loop()``, ``web_search()``.

Loaded in the kernel on first use (as ``_scratchpad_llm_bridge``); it imports the scratchpad
LLM layer from the host environment, which pads can see. Model calls run on one background
event loop, so clients are reused across calls and ``complete_async`` works in cells that use
top-level ``await``. Long calls report progress every 10 s, so they never trip the cell's
inactivity timeout.

Cells written for Anton's pads work unchanged: ``complete`` takes ``tools`` and
``tool_choice`` and answers a :class:`Completion` (a ``str`` of the reply's text that also has
``.content``, ``.tool_calls``, ``.usage`` and ``.stop_reason``), the model has ``.model``, and
``agentic_loop`` takes ``max_tokens``. Tools are Anthropic-style dicts (name, description,
input_schema) or OpenAI-style ones (``{"type": "function", "function": {...}}``).
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
    max_tokens: int = 4096,
) -> str:
    """A small tool-calling loop in a cell: the model calls ``tools`` (name, description,
    input_schema) and ``handle_tool(name, input)`` answers, until it replies in text."""
    return get_llm().run_loop(system, user_message, tools, handle_tool, max_turns, max_tokens)


def web_search(query: str, *, max_tokens: int = 2048) -> str:
    """Web search through the model provider's native search tool (Anthropic has one)."""
    llm = get_llm()
    search = getattr(llm.provider, "web_search", None)
    if search is None:
        raise RuntimeError(
            f"web_search needs a provider with native web search; {llm.provider.name!r} has "
            "none here. Fetch pages directly (for example with httpx), or use an anthropic model"
        )
    return str(llm.wait(search(query, max_tokens=max_tokens)))


class Completion(str):
    """A model's reply: its text, as a ``str`` (so ``print(reply)`` and ``reply + "..."``
    work), with the fields of Anton's ``LLMResponse`` beside it."""

    tool_calls: Sequence[Any] = ()  # each reply has its own list (see ``of``)
    usage: Any = None
    stop_reason: str = "end_turn"
    model: str = ""

    @classmethod
    def of(cls, response: Any, model: str) -> Completion:
        """The reply ``response`` (a ``scratchpad.llm`` Response) of ``model``."""
        reply = cls(response.text)
        reply.tool_calls = list(response.tool_calls)  # each: .id, .name, .input
        reply.usage = response.usage  # .input_tokens, .output_tokens
        reply.stop_reason = response.stop_reason
        reply.model = model
        return reply

    @property
    def content(self) -> str:
        """The reply's text (Anton's ``response.content``)."""
        return str(self)

    @property
    def text(self) -> str:
        return str(self)


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
    @property
    def model(self) -> str:
        """The model's name, as its provider knows it."""
        return str(getattr(self.provider, "model", "") or self.spec)

    def complete(
        self,
        *,
        system: str = "",
        messages: Sequence[Any],
        tools: Sequence[Any] | None = None,
        tool_choice: Any = None,
        max_tokens: int = 4096,
    ) -> Completion:
        """The model's reply to ``messages`` (dicts with role/content, or Messages), offered
        ``tools``; a ``str`` of its text with ``.content`` and ``.tool_calls``."""
        return self.wait(self._complete(system, messages, tools, tool_choice, max_tokens))

    async def complete_async(
        self,
        *,
        system: str = "",
        messages: Sequence[Any],
        tools: Sequence[Any] | None = None,
        tool_choice: Any = None,
        max_tokens: int = 4096,
    ) -> Completion:
        """Awaitable :meth:`complete`, for ``asyncio.gather`` fan-out in a cell."""
        future = asyncio.run_coroutine_threadsafe(
            self._complete(system, messages, tools, tool_choice, max_tokens), self._loop
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
        max_tokens: int = 4096,
    ) -> str:
        from scratchpad.llm.messages import Message, TextBlock, ToolResultBlock

        specs = _tool_specs(tools)
        history = [Message.user(user_message)]
        for _ in range(max_turns):
            response = self.wait(
                self.provider.complete(
                    system=system, messages=history, tools=specs, max_tokens=max_tokens
                )
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
    async def _complete(
        self,
        system: str,
        messages: Sequence[Any],
        tools: Sequence[Any] | None,
        tool_choice: Any,
        max_tokens: int,
    ) -> Completion:
        response = await self.provider.complete(
            system=system,
            messages=_messages(messages),
            tools=_tool_specs(tools or ()),
            tool_choice=_tool_choice(tool_choice),
            max_tokens=max_tokens,
        )
        return Completion.of(response, self.model)

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

    return [m if isinstance(m, Message) else Message.from_dict(_long_form(m)) for m in messages]


def _long_form(message: dict[str, Any]) -> dict[str, Any]:
    """A message dict with Anthropic's short form of a tool result (its text as ``content``)
    spelled out as a list of blocks."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    blocks = [
        {**block, "content": [{"type": "text", "text": block["content"]}]}
        if isinstance(block, dict)
        and block.get("type") == "tool_result"
        and isinstance(block.get("content"), str)
        else block
        for block in content
    ]
    return {**message, "content": blocks}


def _tool_specs(tools: Sequence[Any]) -> list[Any]:
    """Tools as the provider layer takes them: ToolSpecs, Anthropic-style dicts (name,
    description, input_schema) or OpenAI-style ones (``{"type": "function", ...}``)."""
    from scratchpad.llm.messages import ToolSpec

    specs = []
    for tool in tools:
        if isinstance(tool, ToolSpec):
            specs.append(tool)
            continue
        if not isinstance(tool, dict) or not isinstance(tool.get("function", tool), dict):
            raise TypeError(f"a tool is a dict with name, description, input_schema: {tool!r}")
        spec = tool.get("function", tool)
        schema = spec.get("input_schema", spec.get("parameters", {"type": "object"}))
        specs.append(ToolSpec(str(spec["name"]), str(spec.get("description", "")), schema))
    return specs


def _tool_choice(choice: Any) -> dict[str, Any] | None:
    """``tool_choice`` as the provider layer takes it: Anthropic's form (``{"type": "auto" |
    "any" | "none"}``, ``{"type": "tool", "name": ...}``), a word, or OpenAI's forms."""
    if choice is None or (isinstance(choice, dict) and "function" not in choice):
        return choice
    if isinstance(choice, dict):
        return {"type": "tool", "name": str(choice["function"]["name"])}
    word = str(choice)
    return {"type": {"required": "any"}.get(word, word)}


def _progress(message: str) -> None:
    import sys

    kernel = getattr(sys.modules.get("_scratchpad_kernel"), "KERNEL", None)
    if kernel is not None:
        kernel.progress(message)
