"""Tools: definitions, the registry, and the built-in tools (scratchpad, read_observation,
read_image)."""

from scratchpad.tools.base import ToolDef, ToolOutcome
from scratchpad.tools.context import ScratchpadObserver, ToolSessionContext
from scratchpad.tools.image_tool import read_image_tool
from scratchpad.tools.observation_tool import read_observation_tool
from scratchpad.tools.registry import ToolRegistry
from scratchpad.tools.scratchpad_tool import scratchpad_tool

__all__ = [
    "ScratchpadObserver",
    "ToolDef",
    "ToolOutcome",
    "ToolRegistry",
    "ToolSessionContext",
    "read_image_tool",
    "read_observation_tool",
    "scratchpad_tool",
]
