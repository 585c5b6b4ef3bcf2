"""Tools: definitions, the registry, and the built-in tools (echo, scratchpad,
read_observation, read_image, shell), registered together by ``builtin_registry``."""

from scratchpad.tools.base import ToolDef, ToolHints, ToolOutcome
from scratchpad.tools.builtin import ShellOptions, builtin_registry
from scratchpad.tools.context import ScratchpadObserver, ToolSessionContext
from scratchpad.tools.image_tool import read_image_tool
from scratchpad.tools.observation_tool import read_observation_tool
from scratchpad.tools.registry import ToolRegistry
from scratchpad.tools.scratchpad_tool import scratchpad_tool

__all__ = [
    "ScratchpadObserver",
    "ShellOptions",
    "ToolDef",
    "ToolHints",
    "ToolOutcome",
    "ToolRegistry",
    "ToolSessionContext",
    "builtin_registry",
    "read_image_tool",
    "read_observation_tool",
    "scratchpad_tool",
]
