"""Observations: large tool outputs kept in SQLite, shown to the model as a summary and an id
(loaded on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scratchpad._lazy import lazy_exports

if TYPE_CHECKING:
    from scratchpad.observations.models import ObservationEntry as ObservationEntry
    from scratchpad.observations.models import ObservationInfo as ObservationInfo
    from scratchpad.observations.models import ReadResult as ReadResult
    from scratchpad.observations.store import ObservationStore as ObservationStore

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
