"""The agent session loop: a model, its tools, events, history (loaded on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scratchpad._lazy import lazy_exports

if TYPE_CHECKING:
    from scratchpad.agent.events import SessionEvent as SessionEvent
    from scratchpad.agent.session import Session as Session

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
