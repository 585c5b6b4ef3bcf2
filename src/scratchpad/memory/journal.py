"""What happened in each cycle: its log file, and one outcome line per cycle.

``ROOT/logs/cycle_<id>.log`` is written line by line while the cycle runs (so a killed cycle
leaves what it did), with the full traceback when the cycle failed. ``ROOT/logs/cycles.jsonl``
gets one JSON line per finished cycle (``cycle_id``, ``outcome``: done / max_iterations /
failed, ``iterations``, ``started``, ``ended``, ``error``, ``summary``); ``history`` reads it.
Lines are appended and fsynced; a line torn by a crash is skipped when read. Both are
scrubbed as they are written (the process's scrubber: a secret becomes its label).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from scratchpad.memory.clock import Clock, iso, local_now
from scratchpad.scrub import scrub

Outcome = Literal["done", "max_iterations", "failed"]
OUTCOMES: tuple[Outcome, ...] = ("done", "max_iterations", "failed")


@dataclass(frozen=True, slots=True)
class CycleRecord:
    """How one cycle ended."""

    cycle_id: str
    outcome: Outcome
    iterations: int
    started: str
    ended: str
    error: str | None = None
    summary: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CycleRecord | None:
        """A record from its JSON form; None when the line is not one of ours."""
        outcome = data.get("outcome")
        if not isinstance(data.get("cycle_id"), str) or outcome not in OUTCOMES:
            return None
        return cls(
            data["cycle_id"],
            outcome,
            int(data.get("iterations") or 0),
            str(data.get("started") or ""),
            str(data.get("ended") or ""),
            data.get("error"),
            data.get("summary"),
        )


def append_record(path: Path, record: CycleRecord) -> None:
    """Append one record as a JSON line, flushed to disk before returning."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = {k: scrub(v) if isinstance(v, str) else v for k, v in asdict(record).items()}
    line = json.dumps(fields, ensure_ascii=False) + "\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def read_records(path: Path) -> list[CycleRecord]:
    """Every readable record, oldest first (a torn or foreign line is skipped)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    records = []
    for line in lines:
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        record = CycleRecord.from_dict(data) if isinstance(data, dict) else None
        if record is not None:
            records.append(record)
    return records


class CycleLog:
    """The log file of one cycle, written as it goes (lines stamped by ``clock``)."""

    def __init__(self, path: Path, clock: Clock = local_now) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.clock = clock
        self._file = path.open("a", encoding="utf-8")

    def write(self, message: str) -> None:
        stamp = iso(self.clock(), "milliseconds")
        self._file.write(f"{stamp} {scrub(message.rstrip())}\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> CycleLog:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None and not isinstance(exc, Exception):
            self.write(f"stopped by {type(exc).__name__}; the cycle did not finish")
        self.close()
