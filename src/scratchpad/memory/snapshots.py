"""Per-cycle snapshots: cycle ids, ``_before``/``_after`` files, retention, restore, reset, diff.

A cycle id is the cycle's start time in UTC, ``YYYYMMDD_HHMMSS`` (UTC so that ids sort in the
order cycles ran when the local clock goes back); a second cycle in the same second gets
``_2``, then ``_3``, ... so no cycle overwrites another's files. Restore and reset first
save the current ``active.yaml`` as ``prerestore_<time>.yaml`` / ``prereset_<time>.yaml`` in
the same directory (restorable by that name), and both hold the agent lock.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from scratchpad.errors import AgentError
from scratchpad.fsutil import atomic_write_bytes, atomic_write_text
from scratchpad.memory.clock import utc_stamp
from scratchpad.memory.layout import AgentPaths
from scratchpad.memory.lock import agent_lock
from scratchpad.memory.state import State, dump_state, read_state, save_state

Which = Literal["before", "after"]
CYCLE_ID = re.compile(r"^\d{8}_\d{6}(?:_\d+)?$")
SNAPSHOT = re.compile(r"^(\d{8}_\d{6}(?:_\d+)?)_(before|after)\.yaml$")
SAVED = re.compile(r"^(prerestore|prereset)_\d{8}_\d{6}(?:_\d+)?$")
CYCLE_LOG = re.compile(r"^cycle_(\d{8}_\d{6}(?:_\d+)?)\.log$")


def cycle_key(cycle_id: str) -> tuple[str, int]:
    """Sort key: by time, then by suffix (``_10`` after ``_9``)."""
    suffix = cycle_id[16:]
    return cycle_id[:15], int(suffix) if suffix.isdigit() else 1


def new_cycle_id(paths: AgentPaths, now: dt.datetime) -> str:
    """The id for a cycle starting at ``now`` (its UTC time), suffixed if that second is
    taken."""
    return _first_free(utc_stamp(now), lambda name: _taken(paths, name))


def _first_free(base: str, taken: Callable[[str], bool]) -> str:
    """``base``, else ``base_2``, ``base_3``, ...: the first name that is not taken."""
    candidate, number = base, 1
    while taken(candidate):
        number += 1
        candidate = f"{base}_{number}"
    return candidate


def _taken(paths: AgentPaths, cycle_id: str) -> bool:
    """A cycle with this id left a file (its log, even when the wake failed)."""
    files = (paths.before(cycle_id), paths.after(cycle_id), paths.cycle_log(cycle_id))
    return any(path.exists() for path in files)


def write_before(paths: AgentPaths, cycle_id: str, text: str) -> None:
    """The state exactly as the wake read it (same bytes)."""
    atomic_write_text(paths.before(cycle_id), text)


def write_after(paths: AgentPaths, cycle_id: str, state: State) -> None:
    """The state as the cycle left it (``last_updated`` untouched)."""
    save_state(paths.after(cycle_id), state)


def snapshot_cycles(paths: AgentPaths) -> list[str]:
    """Ids of the cycles that still have a snapshot, oldest first."""
    if not paths.scratch.is_dir():
        return []
    found = {m.group(1) for p in paths.scratch.iterdir() if (m := SNAPSHOT.match(p.name))}
    return sorted(found, key=cycle_key)


def logged_cycles(paths: AgentPaths) -> list[str]:
    """Ids of every cycle that started (each one has a log), oldest first."""
    if not paths.logs.is_dir():
        return []
    found = {m.group(1) for p in paths.logs.iterdir() if (m := CYCLE_LOG.match(p.name))}
    return sorted(found, key=cycle_key)


def prune(paths: AgentPaths, keep_last: int | None) -> list[Path]:
    """Delete the snapshots of all but the newest ``keep_last`` cycles (logs stay)."""
    if keep_last is None:
        return []
    cycles = snapshot_cycles(paths)
    removed = []
    for cycle_id in cycles[: max(0, len(cycles) - keep_last)]:
        for path in (paths.before(cycle_id), paths.after(cycle_id)):
            if path.exists():
                path.unlink()
                removed.append(path)
    return removed


def snapshot_path(paths: AgentPaths, name: str, which: Which = "after") -> Path:
    """The snapshot file of cycle ``name`` (or a saved ``prerestore_…``/``prereset_…``)."""
    if SAVED.match(name):
        path = _saved(paths, name)
    elif CYCLE_ID.match(name):
        path = paths.before(name) if which == "before" else paths.after(name)
    else:
        raise AgentError(f"{name!r} is not a cycle id (YYYYMMDD_HHMMSS[_N]); {_recent(paths)}")
    if not path.is_file():
        raise AgentError(f"no snapshot {path.name} in {paths.scratch}; {_recent(paths)}")
    return path


def _recent(paths: AgentPaths) -> str:
    cycles = snapshot_cycles(paths)
    if not cycles:
        return "this agent has no snapshots yet"
    return f"cycles with snapshots: {', '.join(cycles[-5:])} (see `scratchpad agent history`)"


def save_current(paths: AgentPaths, reason: str, now: dt.datetime) -> Path | None:
    """Copy ``active.yaml`` byte for byte to ``<reason>_<UTC time>.yaml``; None when missing."""
    try:
        data = paths.active.read_bytes()
    except FileNotFoundError:
        return None
    name = _first_free(
        f"{reason}_{utc_stamp(now)}", lambda n: paths.scratch.joinpath(f"{n}.yaml").exists()
    )
    target = paths.scratch / f"{name}.yaml"
    atomic_write_bytes(target, data)
    return target


def _saved(paths: AgentPaths, name: str) -> Path:
    return paths.scratch / f"{name}.yaml"


def restore(paths: AgentPaths, name: str, which: Which, now: dt.datetime) -> Path | None:
    """Make ``active.yaml`` the snapshot (validated first); where the old one was saved."""
    source = snapshot_path(paths.require(), name, which)
    text = read_state(source).text  # a snapshot that would not load is refused here
    with agent_lock(paths.lock):
        saved = save_current(paths, "prerestore", now)
        atomic_write_text(paths.active, text)
    return saved


def reset(paths: AgentPaths, now: dt.datetime) -> Path | None:
    """Remove ``active.yaml`` (the next wake starts from the default state); snapshots stay."""
    with agent_lock(paths.require().lock):
        saved = save_current(paths, "prereset", now)
        paths.active.unlink(missing_ok=True)
    return saved


@dataclass(frozen=True, slots=True)
class CycleDiff:
    """What one cycle changed: the keys, and a unified diff of the two states."""

    cycle_id: str
    changed_keys: list[str]
    text: str


def diff(paths: AgentPaths, cycle_id: str | None = None) -> CycleDiff:
    """``_before`` → ``_after`` of a cycle (default: the newest one that has both)."""
    if cycle_id is None:
        complete = [c for c in snapshot_cycles(paths) if paths.after(c).exists()]
        if not complete:
            raise AgentError(f"{paths.root} has no finished cycle with snapshots yet")
        cycle_id = complete[-1]
    before_path = snapshot_path(paths, cycle_id, "before")
    after_path = snapshot_path(paths, cycle_id, "after")
    before, after = read_state(before_path).state, read_state(after_path).state
    keys = [k for k in dict.fromkeys([*before, *after]) if before.get(k) != after.get(k)]
    lines = difflib.unified_diff(
        dump_state(before).splitlines(),
        dump_state(after).splitlines(),
        fromfile=before_path.name,
        tofile=after_path.name,
        lineterm="",
    )
    return CycleDiff(cycle_id, keys, "\n".join(lines))
