"""Session events and the subscribers that receive them.

Kinds: text_delta, tool_call, tool_progress, tool_result, scratchpad_call, scratchpad_result,
scratchpad_killed, scratchpad_reset, scratchpad_empty_code, cap_exhausted, history_repair,
turn_end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

Subscriber = Callable[["SessionEvent"], None]


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One thing that happened in a session (``kind``: round, tool call, reply, ...)."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


class EventBus:
    """Delivers events to subscribers; a failing subscriber is logged, never fatal."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Add a subscriber; returns a function that removes it."""
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber)

    def emit(self, event: SessionEvent) -> None:
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception:
                log.exception("event subscriber failed on %s; the turn goes on", event.kind)
