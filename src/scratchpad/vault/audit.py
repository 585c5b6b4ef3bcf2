"""The vault's audit log: which pad (or probe) got which connection, and every change, when.

Append-only JSON lines in ``<home>/vault/audit.jsonl`` (0600). Entries hold names only —
event, pad, engine, connection name — never a value, so the log is safe to show and to keep.
"""

from __future__ import annotations

import json
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from scratchpad.fsutil import append_private

AUDIT_FILE = "audit.jsonl"
Event = Literal["inject", "rotate", "save", "delete", "grant", "revoke", "probe"]
DEFAULT_LIMIT = 100


def now() -> str:
    """A UTC timestamp with seconds, as every vault record and audit line carries."""
    return datetime.now(UTC).isoformat(timespec="seconds")


class AuditLog:
    """Appends and reads the audit lines of one vault directory."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / AUDIT_FILE

    def append(self, event: Event, engine: str, name: str, *, pad: str | None = None) -> None:
        """One line, appended whole or not at all to an O_APPEND file (lines never
        interleave; a full disk raises DiskFullError and leaves no torn line)."""
        entry: dict[str, Any] = {"at": now(), "event": event}
        if pad is not None:
            entry["pad"] = pad
        entry.update(engine=engine, name=name)
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        append_private(self.path, line.encode("utf-8"))

    def read(self, limit: int = DEFAULT_LIMIT) -> list[dict[str, Any]]:
        """The last ``limit`` entries, oldest first (lines that do not parse are skipped)."""
        if limit <= 0:
            return []
        try:
            with self.path.open(encoding="utf-8", errors="replace") as handle:
                lines = deque(handle, maxlen=limit)
        except FileNotFoundError:
            return []
        entries = []
        for line in lines:
            try:
                entries.append(json.loads(line))
            except ValueError:
                continue
        return entries
