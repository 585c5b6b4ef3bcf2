"""A pad's cells on disk (``history.jsonl``), so view/dump survive the process.

An append-only log, one JSON cell per line, written with a single ``write`` on an
``O_APPEND`` descriptor: cheap enough for every cell, and a torn last line (a crash mid-write)
is skipped on load instead of losing the file.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from scratchpad.runtime.cell import Cell


class CellHistory:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def load(self) -> list[Cell]:
        cells: list[Cell] = []
        try:
            handle = self.path.open(encoding="utf-8", errors="replace")
        except OSError:
            return cells
        with handle:
            for line in handle:
                with contextlib.suppress(ValueError, TypeError):
                    data = json.loads(line)
                    if isinstance(data, dict):
                        cells.append(Cell.from_dict(data))
        return cells

    def append(self, cell: Cell) -> None:
        line = json.dumps(cell.to_dict(), ensure_ascii=False) + "\n"
        try:
            if self._fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(self._fd, line.encode("utf-8", "replace"))
        except OSError:
            self.close()  # history is a convenience: a full disk must not fail the cell

    def clear(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
