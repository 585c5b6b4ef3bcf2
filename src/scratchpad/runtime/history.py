"""A pad's cells on disk (``history.jsonl``), so view/dump survive the process.

An append-only log, one cell per line, mode 0600. Each cell is written before anyone is told
it finished, so a cell whose result reached a client survives a crash of the server; a cell
whose record could not be written is answered saying so (:func:`unrecorded`), never ``ok``.

A record is framed: ``#1 <length> <crc32> <JSON>\n``, the length and the CRC-32 (8 hex
digits) of the JSON bytes. An append lands whole or not at all (a write that fails part-way,
a full disk, is cut back: :func:`~scratchpad.fsutil.append_whole`); bytes torn by a crash
mid-append are recognised on load (no record of theirs matches its length and checksum),
skipped and said so in the log, and a whole record written after them on the same line is
kept. Lines of earlier versions (plain JSON) are read as they are.

The file is bounded: one cell's record keeps at most half of ``max_bytes`` (long fields cut,
saying so), and past ``max_bytes`` the oldest cells are folded into one note cell and the
file is rewritten atomically. Writes may come from worker threads (big cells are written off
the event loop); a lock keeps them whole and in order.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import zlib
from collections.abc import Callable
from pathlib import Path

from scratchpad.fsutil import append_whole, atomic_write_bytes, disk_full_in
from scratchpad.runtime.cell import Cell, fit_cell

FOLDED = "history folded"  # the description of the note cell that stands for folded cells
_ENCODER = json.JSONEncoder(ensure_ascii=False)
_HEADER = re.compile(rb"#1 (\d{1,12}) ([0-9a-f]{8}) ")  # a record's frame (see the module)

log = logging.getLogger(__name__)


def encode(cell: Cell, limit: int | None = None) -> bytes:
    """One framed line of the file; with ``limit``, the record fitted to about that many
    bytes."""
    body = _ENCODER.encode(cell.to_dict()).encode("utf-8", "replace")
    if limit is not None and len(body) > limit:
        data = fit_cell(
            cell.to_dict(), limit, "from this pad's history (SCRATCHPAD_HISTORY_MAX_BYTES)"
        )
        body = _ENCODER.encode(data).encode("utf-8", "replace")
    return frame(body)


def frame(body: bytes) -> bytes:
    """The line of the file that holds the record ``body`` (one line of JSON)."""
    return b"#1 %d %08x %s\n" % (len(body), zlib.crc32(body), body)


def unframe(line: bytes) -> tuple[bytes | None, bool]:
    """The JSON of the whole framed record that ends ``line`` (one line of the file), or
    None; and whether bytes torn by a crash came before it. A line of an earlier version
    (plain JSON) has no frame: None, False."""
    end = len(line) - line.endswith(b"\n")
    for match in _HEADER.finditer(line, 0, end):
        if end - match.end() == int(match[1]):  # the length first: a cheap test
            body = memoryview(line)[match.end() : end]
            if zlib.crc32(body) == int(match[2], 16):
                return bytes(body), match.start() > 0
    return None, not line.startswith(b"{")


def unrecorded(cell: Cell, exc: OSError) -> None:
    """Mark a cell that ran but whose record could not be written: it is never answered
    ``ok``, and its error says why (its output stays in the answer and in memory)."""
    if cell.status == "ok":
        cell.status = "error"
    cell.error = (cell.error or "") + (
        f"This cell ran, but its record could not be stored: {exc}. What it printed and "
        "returned is in this answer only: it is not in the pad's history and is lost when "
        "the pad stops.\n"
    )


class CellHistory:
    """The history file of one pad; ``disk`` is the directory named when it is full (the
    home)."""

    def __init__(self, path: Path, max_bytes: int, *, disk: Path | None = None) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.disk = disk or path.parent
        self._fd: int | None = None
        self.size: int | None = None  # bytes in the file, once known
        self._lock = threading.Lock()

    def load(self) -> list[Cell]:
        """Every whole cell; torn or unreadable lines are skipped and counted in the log."""
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
                body, torn = unframe(line)
                skipped += torn
                if body is None and torn:
                    continue  # nothing whole in it
                try:  # a whole record, or a line of an earlier version
                    data = json.loads((line if body is None else body).decode("utf-8", "replace"))
                    cells.append(Cell.from_dict(data))
                except (ValueError, TypeError, AttributeError):
                    skipped += 1
        self.size = size
        if skipped:
            log.warning("%s: skipped %d unreadable line(s)", self.path, skipped)
        return number_by_position(cells)

    def append(self, cell: Cell) -> bool:
        """Write one finished cell now, whole or not at all; True when the file went over its
        bound (the caller folds and :meth:`rewrite`\\ s it). A failed write raises (a full
        disk: :class:`~scratchpad.errors.DiskFullError` naming ``disk``)."""
        data = encode(cell, self.max_bytes // 2)
        with self._lock, disk_full_in(self.disk):
            try:
                if self._fd is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                    self.size = os.fstat(self._fd).st_size
                append_whole(self._fd, data, self.size)
            except OSError as exc:
                log.warning("%s: could not record cell %s: %s", self.path, cell.id, exc)
                self._close_fd()  # the next append opens it again (space may be back)
                raise
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


def number_by_position(cells: list[Cell]) -> list[Cell]:
    """Number the cells of records written before cells had numbers: each one after the cell
    before it (a fold note counts the cells it stands for); ``cells``, numbered in place."""
    last = 0
    for cell in cells:
        if cell.number:
            last = cell.number
        elif _folded_count(cell):
            last += _folded_count(cell)
        else:
            cell.number = last = last + 1
    return cells


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
