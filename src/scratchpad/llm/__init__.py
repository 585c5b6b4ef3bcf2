"""Provider-neutral LLM layer: messages, the Provider interface, scripted provider, structured
output and tool-argument repair. Provider SDKs are imported only by their adapters."""

from scratchpad.llm.messages import (
    Complete,
    ImageBlock,
    Message,
    Response,
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
from scratchpad.llm.provider import Provider, with_retries
from scratchpad.llm.scripted import ScriptedProvider
from scratchpad.llm.structured import generate_object
from scratchpad.llm.toolargs import parse_arguments

__all__ = [
    "Complete",
    "ImageBlock",
    "Message",
    "Provider",
    "Response",
    "ScriptedProvider",
    "StreamEvent",
    "TextBlock",
    "TextDelta",
    "ToolCall",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "ToolUseDelta",
    "ToolUseEnd",
    "ToolUseStart",
    "Usage",
    "generate_object",
    "parse_arguments",
    "with_retries",
]
