"""Read-only views of an agent directory: its status and the history of its cycles.

A cycle's outcome comes from ``logs/cycles.jsonl``; a cycle that has a log but no outcome
line is ``running`` (the newest one, while the lock is held) or ``interrupted`` (killed or
stopped before it finished). Nothing here takes the lock or writes a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scratchpad.memory.journal import CycleRecord, read_records
from scratchpad.memory.layout import AgentPaths
from scratchpad.memory.lock import is_locked
from scratchpad.memory.snapshots import cycle_key, logged_cycles, snapshot_cycles
from scratchpad.memory.state import State, load_state


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One cycle as ``history`` shows it."""

    cycle_id: str
    outcome: str  # done | max_iterations | failed | running | interrupted
    iterations: int | None
    started: str | None
    snapshots: str  # before+after | before | none (pruned, or the wake failed)
    detail: str  # the summary of a done cycle, the error of a failed one


@dataclass(frozen=True, slots=True)
class AgentStatus:
    """An agent directory at a glance: its state, last cycle and what is configured."""

    root: Path
    state: State
    cycles: int
    last: HistoryEntry | None
    running: bool


def cycle_history(paths: AgentPaths) -> list[HistoryEntry]:
    """Every cycle that started, oldest first."""
    records = {record.cycle_id: record for record in read_records(paths.cycles_log)}
    ids = set(records) | set(logged_cycles(paths)) | set(snapshot_cycles(paths))
    ordered = sorted(ids, key=cycle_key)
    running = is_locked(paths.lock)
    return [
        _entry(paths, cycle_id, records.get(cycle_id), running and cycle_id == ordered[-1])
        for cycle_id in ordered
    ]


def _entry(
    paths: AgentPaths, cycle_id: str, record: CycleRecord | None, running: bool
) -> HistoryEntry:
    before, after = paths.before(cycle_id).exists(), paths.after(cycle_id).exists()
    snapshots = "before+after" if before and after else "before" if before else "none"
    if record is None:
        outcome = "running" if running else "interrupted"
        return HistoryEntry(cycle_id, outcome, None, None, snapshots, "")
    detail = record.error if record.outcome == "failed" else record.summary
    return HistoryEntry(
        cycle_id, record.outcome, record.iterations, record.started, snapshots, detail or ""
    )


def agent_status(paths: AgentPaths) -> AgentStatus:
    """The state in ``active.yaml`` (the default when missing) and the last cycle."""
    state = load_state(paths.require().active)
    history = cycle_history(paths)
    return AgentStatus(
        paths.root,
        state,
        len(history),
        history[-1] if history else None,
        is_locked(paths.lock),
    )
