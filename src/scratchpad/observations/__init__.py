"""Observations: large tool outputs kept in SQLite, shown to the model as a summary and an id."""

from scratchpad.observations.models import ObservationEntry, ObservationInfo, ReadResult
from scratchpad.observations.store import ObservationStore

__all__ = ["ObservationEntry", "ObservationInfo", "ObservationStore", "ReadResult"]
