"""Provider-neutral LLM layer: messages, the Provider interface, scripted provider, structured
output and tool-argument repair (loaded on first use). Provider SDKs are imported only by their
adapters."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scratchpad._lazy import lazy_exports

if TYPE_CHECKING:
    from scratchpad.llm.messages import Complete as Complete
    from scratchpad.llm.messages import ImageBlock as ImageBlock
    from scratchpad.llm.messages import Message as Message
    from scratchpad.llm.messages import Response as Response
    from scratchpad.llm.messages import StreamEvent as StreamEvent
    from scratchpad.llm.messages import TextBlock as TextBlock
    from scratchpad.llm.messages import TextDelta as TextDelta
    from scratchpad.llm.messages import ToolCall as ToolCall
    from scratchpad.llm.messages import ToolResultBlock as ToolResultBlock
    from scratchpad.llm.messages import ToolSpec as ToolSpec
    from scratchpad.llm.messages import ToolUseBlock as ToolUseBlock
    from scratchpad.llm.messages import ToolUseDelta as ToolUseDelta
    from scratchpad.llm.messages import ToolUseEnd as ToolUseEnd
    from scratchpad.llm.messages import ToolUseStart as ToolUseStart
    from scratchpad.llm.messages import Usage as Usage
    from scratchpad.llm.provider import Provider as Provider
    from scratchpad.llm.provider import with_retries as with_retries
    from scratchpad.llm.scripted import ScriptedProvider as ScriptedProvider
    from scratchpad.llm.structured import generate_object as generate_object
    from scratchpad.llm.toolargs import parse_arguments as parse_arguments

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
