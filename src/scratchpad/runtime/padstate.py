"""A pad's ``state.json`` (in its directory, written by the server only, 0600): what must
outlive the server process: the generation of its latest kernel (one more at every kernel
start, so a stream of a kernel never continues into its successor), since when it is
asleep, when it was last used, and (``reverted``) the cells whose effect a revert undid.

The file is read as untrusted data (size-capped, never through a symbolic link, every field
checked): a missing or damaged file reads as a pad that never ran, and its unknown fields
are kept when it is rewritten.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from scratchpad.fsutil import PRIVATE_FILE_MODE, atomic_write_text

STATE_FILE = "state.json"
STATE_CAP = 64 * 1024  # bytes read of it at most


@dataclass(frozen=True, slots=True)
class PadState:
    """``generation``: kernels started so far (0: none yet); ``asleep_since``: epoch seconds
    when the pad went to sleep (None: it is not asleep); ``last_activity``: when a cell last
    started or ended, as known when the state was written."""

    generation: int = 0
    asleep_since: float | None = None
    last_activity: float | None = None


def read_raw(root: Path) -> dict[str, Any]:
    """The JSON object in ``root``'s state file; {} when missing, too big or not an object."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(root / STATE_FILE, flags)
    except OSError:
        return {}
    try:
        with os.fdopen(fd, "rb") as file:
            data = file.read(STATE_CAP + 1)
    except OSError:
        return {}
    if len(data) > STATE_CAP:
        return {}
    with contextlib.suppress(ValueError, RecursionError):
        loaded = json.loads(data.decode("utf-8"))
        if isinstance(loaded, dict):
            return loaded
    return {}


def read_state(root: Path) -> PadState:
    """The pad's state (blocking I/O); every field that is not what it should be reads as
    its default."""
    raw = read_raw(root)
    generation = raw.get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        generation = 0
    return PadState(
        generation=generation,
        asleep_since=_time(raw.get("asleep_since")),
        last_activity=_time(raw.get("last_activity")),
    )


def _time(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value) if value >= 0 else None
    return None


def write_state(root: Path, state: PadState) -> None:
    """Write ``state`` atomically (0600), keeping the fields of the file this module does not
    know (blocking I/O; OSError, DiskFullError when it cannot be written)."""
    raw = read_raw(root)
    for field in fields(PadState):
        raw[field.name] = getattr(state, field.name)
    atomic_write_text(root / STATE_FILE, json.dumps(raw, sort_keys=True), mode=PRIVATE_FILE_MODE)


def update_state(root: Path, **changes: Any) -> PadState:
    """Read, change the fields named, write (blocking I/O); the state written."""
    state = replace(read_state(root), **changes)
    write_state(root, state)
    return state


REVERTED_KEPT = 1000  # numbers of reverted cells remembered


def reverted(root: Path) -> list[int]:
    """The numbers of the cells whose effect on the namespace was undone (``revert``),
    oldest first: a record for views of the history (blocking I/O)."""
    found = read_raw(root).get("reverted")
    if not isinstance(found, list):
        return []
    return [n for n in found if isinstance(n, int) and not isinstance(n, bool) and n > 0]


def set_reverted(root: Path, numbers: list[int]) -> None:
    """Replace the list of reverted cells (blocking I/O; the other fields kept)."""
    raw = read_raw(root)
    raw["reverted"] = numbers[-REVERTED_KEPT:]
    atomic_write_text(root / STATE_FILE, json.dumps(raw, sort_keys=True), mode=PRIVATE_FILE_MODE)
