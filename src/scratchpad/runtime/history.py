"""A pad's cells on disk (``history.jsonl``), so view/dump survive the process.

An append-only log, one JSON cell per line, mode 0600. Each cell is written (one ``write`` on
an ``O_APPEND`` descriptor) before anyone is told it finished, so a cell whose result reached
a client survives a crash of the server. A torn last line (a crash mid-write) is skipped on
load, and said so in the log. The file is bounded: one cell's record keeps at most half of
``max_bytes`` (long fields cut, saying so), and past ``max_bytes`` the oldest cells are folded
into one note cell and the file is rewritten atomically. Writes may come from worker threads
(big cells are written off the event loop); a lock keeps them whole and in order.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from scratchpad.fsutil import atomic_write_bytes
from scratchpad.runtime.cell import Cell, fit_cell

FOLDED = "history folded"  # the description of the note cell that stands for folded cells
_ENCODER = json.JSONEncoder(ensure_ascii=False)

log = logging.getLogger(__name__)


def encode(cell: Cell, limit: int | None = None) -> bytes:
    """One line of the file; with ``limit``, the record fitted to about that many bytes."""
    data = cell.to_dict()
    line = (_ENCODER.encode(data) + "\n").encode("utf-8", "replace")
    if limit is None or len(line) <= limit:
        return line
    data = fit_cell(data, limit, "from this pad's history (SCRATCHPAD_HISTORY_MAX_BYTES)")
    return (_ENCODER.encode(data) + "\n").encode("utf-8", "replace")


class CellHistory:
    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._fd: int | None = None
        self.size: int | None = None  # bytes in the file, once known
        self._lock = threading.Lock()

    def load(self) -> list[Cell]:
        """Every readable cell; unreadable lines are skipped and counted in the log."""
        cells: list[Cell] = []
        skipped = 0
        try:
            handle = self.path.open("rb")
        except OSError:
            self.size = 0
            return cells
        with handle:
            size = 0
            for line in handle:
                size += len(line)
                try:
                    data = json.loads(line.decode("utf-8", "replace"))
                    cells.append(Cell.from_dict(data))
                except (ValueError, TypeError, AttributeError):
                    skipped += 1
        self.size = size
        if skipped:
            log.warning("%s: skipped %d unreadable line(s)", self.path, skipped)
        return cells

    def append(self, cell: Cell) -> bool:
        """Write one finished cell now; True when the file went over its bound (the caller
        folds and :meth:`rewrite`\\ s it)."""
        data = encode(cell, self.max_bytes // 2)
        with self._lock:
            try:
                if self._fd is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                    self.size = os.fstat(self._fd).st_size
                os.write(self._fd, data)
            except OSError as exc:  # a full disk must not fail a cell; say so in the log
                log.warning("%s: could not record cell %s: %s", self.path, cell.id, exc)
                self._close_fd()
                return False
            self.size = (self.size or 0) + len(data)
            return self.size > self.max_bytes

    def rewrite(self, cells: list[Cell]) -> None:
        """Replace the file with ``cells`` (atomically: the old file or the new one)."""
        with self._lock:
            try:
                self._replace(cells)
            except OSError as exc:
                log.warning("%s: could not rewrite the history: %s", self.path, exc)

    def rescrub(self, change: Callable[[Cell], bool]) -> bool:
        """Rewrite the stored cells that ``change`` alters (in place; it says whether it did),
        e.g. scrubbed with a secret learnt since. Looked at first without the lock, so cells
        go on being recorded meanwhile; the file is replaced under the lock only when a cell
        changed (unreadable lines go with it), and the next append opens the new file. Whether
        it changed; an OSError of the rewrite is raised."""
        reader = CellHistory(self.path, self.max_bytes)  # its own size: appends go on here
        if not any([change(cell) for cell in reader.load()]):
            return False
        with self._lock:
            cells = self.load()
            if not cells:  # cleared (a reset) meanwhile
                return False
            for cell in cells:
                change(cell)
            self._replace(cells)
        return True

    def _replace(self, cells: list[Cell]) -> None:
        """Write ``cells`` as the whole file, atomically (the lock held)."""
        data = b"".join(encode(cell, self.max_bytes // 2) for cell in cells)
        self._close_fd()  # an O_APPEND descriptor would keep writing to the old file
        atomic_write_bytes(self.path, data, mode=0o600)
        self.size = len(data)

    def clear(self) -> None:
        with self._lock:
            self._close_fd()
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            self.size = 0

    def close(self) -> None:
        with self._lock:
            self._close_fd()

    def _close_fd(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def fold(cells: list[Cell], keep_bytes: int) -> list[Cell]:
    """The newest cells that fit in ``keep_bytes`` (at least the last one), after one note
    cell that says how many older cells were folded away (earlier notes included)."""
    earlier = sum(_folded_count(cell) for cell in cells)
    real = [cell for cell in cells if _folded_count(cell) == 0]
    kept: list[Cell] = []
    size = 0
    for cell in reversed(real):
        size += len(encode(cell, keep_bytes))
        if kept and size > keep_bytes:
            break
        kept.append(cell)
    kept.reverse()
    folded = earlier + len(real) - len(kept)
    note = Cell(
        code="",
        description=FOLDED,
        stdout=(
            f"{folded} earlier cell(s) were folded away to keep this pad's history under "
            "its size limit (SCRATCHPAD_HISTORY_MAX_BYTES).\n"
        ),
    )
    return [note, *kept]


def _folded_count(cell: Cell) -> int:
    """How many cells a fold note stands for (0 for an ordinary cell)."""
    if cell.description != FOLDED or cell.code:
        return 0
    try:
        return int(cell.stdout.split(" ", 1)[0])
    except ValueError:
        return 0


def count_cells(path: Path) -> int:
    """How many cells a history file holds (its lines), without decoding them."""
    count = 0
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                count += chunk.count(b"\n")
    except OSError:
        return 0
    return count
