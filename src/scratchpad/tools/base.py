"""Tool definitions and what a tool call gives back.

A handler is ``async (context, input) -> str | list[block] | ToolOutcome``, or an async
generator that yields progress strings and then its result as the last item.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from scratchpad.llm.messages import ImageBlock, TextBlock, ToolSpec

ResultContent = str | list[TextBlock | ImageBlock]


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A tool's answer: content for the model, whether it worked, and why not."""

    content: ResultContent
    ok: bool = True
    reason: str | None = None

    def blocks(self) -> tuple[TextBlock | ImageBlock, ...]:
        if isinstance(self.content, str):
            return (TextBlock(self.content),)
        return tuple(self.content)

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.blocks() if isinstance(b, TextBlock))


HandlerResult = ResultContent | ToolOutcome
Handler = Callable[[Any, dict[str, Any]], Awaitable[HandlerResult] | AsyncIterator[Any]]


@dataclass(frozen=True, slots=True)
class ToolHints:
    """What a client may assume of a tool's calls (MCP tool annotations; hints, not promises).
    For a tool of several actions they hold for its most far-reaching action."""

    read_only: bool = False  # never changes anything
    destructive: bool = False  # may delete or reset state (meaningful when not read_only)
    idempotent: bool = False  # the same call twice does no more than once
    open_world: bool = False  # reaches beyond this machine's own state (the network, ...)


@dataclass(frozen=True, slots=True)
class ToolDef:
    """A tool. ``description`` and ``input_schema`` are what the model sees; ``prompt`` is a
    fragment added to the system prompt while the tool is registered; ``title`` and ``hints``
    are for people and clients (MCP shows them)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    prompt: str | None = None
    offered: Callable[[Any], bool] | None = None  # shown to the model only when true
    title: str | None = None
    hints: ToolHints | None = None

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema)


def as_outcome(result: object) -> ToolOutcome:
    """Normalise what a handler returned; anything else is a programming error, reported."""
    if isinstance(result, ToolOutcome):
        return result
    if isinstance(result, str):
        return ToolOutcome(result)
    if isinstance(result, list) and all(isinstance(b, (TextBlock, ImageBlock)) for b in result):
        return ToolOutcome(list(result))
    return ToolOutcome(
        f"the tool returned {type(result).__name__}, not text or content blocks",
        ok=False,
        reason="bad_result",
    )


def given(tool_input: dict[str, Any]) -> dict[str, Any]:
    """The fields a call really gave. Strict-schema clients must send every field and send
    ``""``, ``0``, ``[]`` or ``{}`` for "none" (a name for list, a timeout of 0): a tool whose
    fields mean nothing at those values reads them as absent. ``false`` stays (a real answer)."""
    return {key: value for key, value in tool_input.items() if not _none(value)}


def _none(value: object) -> bool:
    if value is None or isinstance(value, bool):
        return value is None
    return value in ("", 0, [], {})
