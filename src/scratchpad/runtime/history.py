"""A pad's cells on disk (``history.jsonl``), so view/dump survive the process.

An append-only log, one JSON cell per line. Cells are written in batches (at most
``FLUSH_DELAY_S`` after they finish, and at close) with one ``write`` on an ``O_APPEND``
descriptor, so a burst of tiny cells costs one write instead of one each. A torn last line (a
crash mid-write) is skipped on load instead of losing the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path

from scratchpad.runtime.cell import Cell

FLUSH_DELAY_S = 0.1
_ENCODER = json.JSONEncoder(ensure_ascii=False)


class CellHistory:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._pending: list[Cell] = []
        self._timer: asyncio.TimerHandle | None = None

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
        """Queue a finished cell; it reaches the disk within FLUSH_DELAY_S."""
        self._pending.append(cell)
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._timer = loop.call_later(FLUSH_DELAY_S, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        cells, self._pending = self._pending, []
        text = "".join(_ENCODER.encode(cell.to_dict()) + "\n" for cell in cells)
        try:
            if self._fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(self._fd, text.encode("utf-8", "replace"))
        except OSError:
            self._close_fd()  # history is a convenience: a full disk must not fail a cell

    def clear(self) -> None:
        self._pending.clear()
        self.flush()
        self._close_fd()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def close(self) -> None:
        self.flush()
        self._close_fd()

    def _close_fd(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
