"""The ``notes`` of a state: appending lines, and the size cap that keeps the prompt bounded.

When notes grow past the cap, the oldest part (cut at a line start) moves to an archive and a
one-line ``[ARCHIVED] ...`` pointer takes its place at the top. About half the cap is kept, so
archiving happens once in a while rather than on every step. The archive is the observation
store when the agent has one (readable with ``read_observation``), else
``ROOT/notes_archive/<cycle>.md``. An earlier pointer moves into the archive with the text it
heads, so the pointers form a chain back to the first note.
"""

from __future__ import annotations

from typing import Protocol

from scratchpad.fsutil import atomic_write_text
from scratchpad.memory.clock import Clock, iso, local_now
from scratchpad.memory.layout import AgentPaths
from scratchpad.memory.state import State
from scratchpad.observations.store import ObservationStore

ARCHIVE_TOOL = "agent_notes"


def append_note(state: State, line: str) -> None:
    """Append ``\\n<line>`` to the notes."""
    state["notes"] = f"{state.get('notes') or ''}\n{line}"


class NotesArchive(Protocol):
    def put(self, text: str) -> str:
        """Keep ``text``; the one-line pointer that says where it went."""
        ...


class FileArchive:
    """``ROOT/notes_archive/<cycle>.md``; several moves in one cycle append sections."""

    def __init__(self, paths: AgentPaths, cycle_id: str, clock: Clock = local_now) -> None:
        self.path = paths.archive / f"{cycle_id}.md"
        self.relative = self.path.relative_to(paths.root)
        self.cycle_id = cycle_id
        self.clock = clock

    def put(self, text: str) -> str:
        old = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
        stamp = iso(self.clock())
        section = f"## cycle {self.cycle_id}, {stamp}: {len(text)} characters\n\n{text}\n\n"
        atomic_write_text(self.path, old + section)
        return f"[ARCHIVED] {len(text)} older characters of notes are in {self.relative}"


class StoreArchive:
    """An observation per move, under the agent's own turn id (so it can be read back)."""

    def __init__(
        self, store: ObservationStore, *, turn_id: str, cycle_id: str, ttl_s: float
    ) -> None:
        self.store, self.turn_id, self.cycle_id, self.ttl_s = store, turn_id, cycle_id, ttl_s

    def put(self, text: str) -> str:
        entry = self.store.put(
            text,
            turn_id=self.turn_id,
            tool=ARCHIVE_TOOL,
            metadata={"cycle": self.cycle_id},
            ttl_seconds=self.ttl_s,
        )
        return (
            f"[ARCHIVED] {len(text)} older characters of notes are in observation {entry} "
            "(read_observation)"
        )


def enforce_cap(state: State, cap: int, archive: NotesArchive) -> bool:
    """Move the oldest notes to ``archive`` when they exceed ``cap``; whether it did."""
    notes = str(state.get("notes") or "")
    if len(notes) <= cap:
        return False
    cut = _cut_point(notes, keep=cap // 2)
    pointer = archive.put(notes[:cut])
    state["notes"] = f"{pointer}\n{notes[cut:]}"
    return True


def _cut_point(notes: str, keep: int) -> int:
    """Where the kept tail starts: at most ``keep`` characters, from a line start if any."""
    start = len(notes) - keep
    newline = notes.find("\n", start - 1)
    return newline + 1 if newline != -1 and newline + 1 < len(notes) else start
