"""The agent session loop: a model, its tools, events, history."""

from scratchpad.agent.events import SessionEvent
from scratchpad.agent.session import Session, default_registry

__all__ = ["Session", "SessionEvent", "default_registry"]
