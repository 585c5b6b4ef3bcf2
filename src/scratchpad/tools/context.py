"""What built-in tools get from the session that runs them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.cell import Cell
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.scrub import scrub

log = logging.getLogger(__name__)

EventSink = Callable[[str, dict[str, Any]], None]


class ScratchpadObserver(Protocol):
    """Called by the scratchpad tool around every cell (never by the runtime itself)."""

    def before_cell(self, pad: str, cell: Cell) -> None: ...

    def after_cell(self, pad: str, cell: Cell) -> None: ...


@dataclass
class ToolSessionContext:
    """The session state tools use: pads, the observation store, the current turn and step,
    observers, and where events and progress go. Observer and sink failures are logged and
    never break a tool call."""

    manager: ScratchpadManager
    store: ObservationStore | None = None
    turn_id: str = "turn"
    step_num: int = 0
    observers: list[ScratchpadObserver] = field(default_factory=list)
    on_event: EventSink | None = None
    on_progress: Callable[[str], None] | None = None
    pads_used: list[str] = field(default_factory=list)
    asked_new_pad: set[str] = field(default_factory=set)
    scrub: Callable[[str], str] = field(default=scrub)  # before anything is stored or shown

    def progress(self, message: str) -> None:
        if self.on_progress is not None:
            _safely(self.on_progress, message)

    def emit(self, event: str, **data: Any) -> None:
        if self.on_event is not None:
            _safely(self.on_event, event, data)

    def notify(self, hook: str, pad: str, cell: Cell) -> None:
        for observer in self.observers:
            method = getattr(observer, hook, None)
            if callable(method):
                _safely(method, pad, cell)


def _safely(function: Callable[..., Any], *args: Any) -> None:
    try:
        function(*args)
    except Exception:
        log.exception("an observer or event subscriber failed; the turn goes on")
