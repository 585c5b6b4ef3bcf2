"""Scratchpad: working memory for LLM agents.

The public API is imported lazily so that ``import scratchpad`` stays cheap (the CLI and the
kernel's helpers should not pay for modules they do not use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scratchpad._lazy import lazy_exports

if TYPE_CHECKING:
    from scratchpad._version import __version__ as __version__
    from scratchpad.agent.session import Session
    from scratchpad.config import Settings
    from scratchpad.errors import (
        ConfigError,
        DiskFullError,
        InstallError,
        InvalidInputError,
        InvalidPadNameError,
        KernelStartError,
        PadClosedError,
        PadError,
        PadNotFoundError,
        ScratchpadError,
        VenvError,
    )
    from scratchpad.llm.scripted import ScriptedProvider
    from scratchpad.observations.store import ObservationStore
    from scratchpad.runtime.base import ScratchpadRuntime
    from scratchpad.runtime.cell import Cell, DisplayEvent, OutputEvent, ProgressEvent
    from scratchpad.runtime.local import LocalRuntime
    from scratchpad.runtime.manager import ScratchpadManager

_EXPORTS = {
    "__version__": "scratchpad._version",
    "Cell": "scratchpad.runtime.cell",
    "ConfigError": "scratchpad.errors",
    "DiskFullError": "scratchpad.errors",
    "DisplayEvent": "scratchpad.runtime.cell",
    "InstallError": "scratchpad.errors",
    "InvalidInputError": "scratchpad.errors",
    "InvalidPadNameError": "scratchpad.errors",
    "KernelStartError": "scratchpad.errors",
    "LocalRuntime": "scratchpad.runtime.local",
    "ObservationStore": "scratchpad.observations.store",
    "OutputEvent": "scratchpad.runtime.cell",
    "PadClosedError": "scratchpad.errors",
    "PadError": "scratchpad.errors",
    "PadNotFoundError": "scratchpad.errors",
    "ProgressEvent": "scratchpad.runtime.cell",
    "ScratchpadError": "scratchpad.errors",
    "ScratchpadManager": "scratchpad.runtime.manager",
    "ScratchpadRuntime": "scratchpad.runtime.base",
    "ScriptedProvider": "scratchpad.llm.scripted",
    "Session": "scratchpad.agent.session",
    "Settings": "scratchpad.config",
    "VenvError": "scratchpad.errors",
}

__all__ = [
    "Cell",
    "ConfigError",
    "DiskFullError",
    "DisplayEvent",
    "InstallError",
    "InvalidInputError",
    "InvalidPadNameError",
    "KernelStartError",
    "LocalRuntime",
    "ObservationStore",
    "OutputEvent",
    "PadClosedError",
    "PadError",
    "PadNotFoundError",
    "ProgressEvent",
    "ScratchpadError",
    "ScratchpadManager",
    "ScratchpadRuntime",
    "ScriptedProvider",
    "Session",
    "Settings",
    "VenvError",
]


__getattr__, __dir__ = lazy_exports("scratchpad", _EXPORTS, globals())
