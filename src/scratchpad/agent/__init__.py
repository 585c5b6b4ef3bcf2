"""The agent session loop: a model, its tools, events, history."""

from scratchpad.agent.events import SessionEvent
from scratchpad.agent.session import Session

__all__ = ["Session", "SessionEvent"]
