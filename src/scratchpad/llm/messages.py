"""Provider-neutral conversation model: content blocks, messages, tool calls, responses, events.

Adapters translate these to and from each provider's wire format; nothing else in Scratchpad
sees a provider's own types. Everything here round-trips through plain JSON (``to_dict`` /
``from_dict``) so histories can be saved and restored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Text in a message."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """An image as base64 data (``media_type`` e.g. ``image/png``)."""

    media_type: str
    data: str
    type: Literal["image"] = "image"


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    """A model's call of a tool, as a block of its message."""

    id: str
    name: str
    input: dict[str, Any]
    type: Literal["tool_use"] = "tool_use"


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    """A tool's answer to one call (text and images), as a block of a user message."""

    tool_use_id: str
    content: tuple[TextBlock | ImageBlock, ...]
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"


Block = TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock


@dataclass(frozen=True, slots=True)
class Message:
    """One turn of a conversation: a role and its blocks."""

    role: Role
    content: tuple[Block, ...]

    @classmethod
    def user(cls, *parts: str | Block) -> Message:
        return cls("user", tuple(_block(part) for part in parts))

    @classmethod
    def assistant(cls, *parts: str | Block) -> Message:
        return cls("assistant", tuple(_block(part) for part in parts))

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextBlock))

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": [block_to_dict(b) for b in self.content]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        role = data.get("role")
        if role not in ("user", "assistant"):
            raise ValueError(f"message role must be 'user' or 'assistant', not {role!r}")
        content = data.get("content", [])
        if isinstance(content, str):
            return cls(role, (TextBlock(content),))
        return cls(role, tuple(block_from_dict(item) for item in content))


def _block(part: str | Block) -> Block:
    return TextBlock(part) if isinstance(part, str) else part


def block_to_dict(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return {"type": "image", "media_type": block.media_type, "data": block.data}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": [block_to_dict(part) for part in block.content],
        "is_error": block.is_error,
    }


def block_from_dict(data: dict[str, Any]) -> Block:
    kind = data.get("type")
    if kind == "text":
        return TextBlock(str(data["text"]))
    if kind == "image":
        return ImageBlock(str(data["media_type"]), str(data["data"]))
    if kind == "tool_use":
        return ToolUseBlock(str(data["id"]), str(data["name"]), dict(data.get("input") or {}))
    if kind == "tool_result":
        parts = tuple(block_from_dict(part) for part in data.get("content", []))
        if not all(isinstance(part, (TextBlock, ImageBlock)) for part in parts):
            raise ValueError("a tool result may hold only text and image blocks")
        return ToolResultBlock(
            str(data["tool_use_id"]),
            parts,  # type: ignore[arg-type]
            bool(data.get("is_error", False)),
        )
    raise ValueError(f"unknown content block type {kind!r}")


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about a tool: name, description, JSON schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call from the model. ``parse_error`` is set when its arguments were not JSON
    (``input`` is then ``{}``); ``repaired`` when they were fixed up (e.g. cut off)."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    parse_error: str | None = None
    repaired: bool = False


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a call used (cache reads and writes counted apart)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "other"]


@dataclass(frozen=True, slots=True)
class Response:
    """A model's whole reply: its blocks, the tool calls among them, usage, why it stopped."""

    content: tuple[Block, ...]
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    stop_reason: StopReason = "end_turn"

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextBlock))

    def as_message(self) -> Message:
        return Message("assistant", self.content)


# -- stream events ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of streamed reply text."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolUseStart:
    """A streamed tool call begins (its id and tool name)."""

    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolUseDelta:
    """A piece of a streamed tool call's JSON arguments."""

    id: str
    partial_json: str


@dataclass(frozen=True, slots=True)
class ToolUseEnd:
    """A streamed tool call is complete, its arguments parsed."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class Complete:
    """The stream ended: the whole reply."""

    response: Response


StreamEvent = TextDelta | ToolUseStart | ToolUseDelta | ToolUseEnd | Complete
"""What a streamed call yields, ending with one :class:`Complete`."""
