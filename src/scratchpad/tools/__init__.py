"""Tools: definitions, the registry, and the built-in tools (echo, scratchpad,
read_observation, read_image, shell), registered together by ``builtin_registry`` (loaded on
first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scratchpad._lazy import lazy_exports

if TYPE_CHECKING:
    from scratchpad.tools.base import ToolDef as ToolDef
    from scratchpad.tools.base import ToolHints as ToolHints
    from scratchpad.tools.base import ToolOutcome as ToolOutcome
    from scratchpad.tools.builtin import ShellOptions as ShellOptions
    from scratchpad.tools.builtin import builtin_registry as builtin_registry
    from scratchpad.tools.context import ScratchpadObserver as ScratchpadObserver
    from scratchpad.tools.context import ToolSessionContext as ToolSessionContext
    from scratchpad.tools.image_tool import read_image_tool as read_image_tool
    from scratchpad.tools.observation_tool import read_observation_tool as read_observation_tool
    from scratchpad.tools.registry import ToolRegistry as ToolRegistry
    from scratchpad.tools.scratchpad_tool import scratchpad_tool as scratchpad_tool

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
# A name that is also its module's is bound now: importing the module later would shadow it.
globals()["scratchpad_tool"] = __getattr__("scratchpad_tool")
