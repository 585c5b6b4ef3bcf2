"""Per-cell journals: what a cell's watchers were told, numbered, so a client that lost its
connection comes back with ``Last-Event-ID`` and misses nothing and gets nothing twice.

A :class:`CellJournal` is a ring of :class:`Frame`\\ s bounded by bytes and by count;
``first_seq`` says what fell off the front (a reader asking for less gets a ``resync``).
Frames are numbered from 1 per cell and carry the pad's kernel generation. A journal ends
only with the runtime's own record of the cell (``recorded``/``gone`` in watch.py): no edge
makes a completion up. When a kernel of a newer generation starts, the journals of cells
of older generations stop taking frames but that record, so a stream of a dead kernel never
runs on into its successor's cells.

In memory only: after a server restart a client gets the recorded cell from the history.
Finished journals are kept ``KEEP_S`` seconds and at most ``KEEP_FINISHED`` per pad.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from scratchpad import events

CELL_BYTES = 1024 * 1024  # what one cell's ring holds, about (text characters)
CELL_FRAMES = 4096
KEEP_S = 600.0
KEEP_FINISHED = 64
FINISHED_BYTES = 8 * 1024 * 1024  # what a pad's finished journals hold together, about
TERMINAL = "cell"  # the type of the runtime's record, the last frame of a journal


@dataclass(frozen=True, slots=True)
class Frame:
    """One event of a cell as its watchers saw it: ``seq`` from 1 per cell, ``gen`` the
    pad's kernel generation when it happened."""

    seq: int
    gen: int
    event: events.WatchEvent | events.Resync
    size: int = 0

    def numbered(self) -> events.Model:
        """The event as a stream sends it, with its number and generation
        (:data:`events.JournalFrame`)."""
        return events.numbered(self.event, self.seq, self.gen)

    def cell(self) -> events.Cell:
        """The cell of the runtime's record (a terminal frame)."""
        assert isinstance(self.event, events.FeedCell)
        return self.event.cell


class CellJournal:
    """The bounded, numbered events of one cell."""

    def __init__(
        self, cell_id: str, gen: int, *, max_bytes: int = CELL_BYTES, max_frames: int = CELL_FRAMES
    ) -> None:
        self.cell_id = cell_id
        self.gen = gen  # the generation the cell runs (or waits) in
        self.ran = False  # it started in a kernel (of generation ``gen``)
        self.max_bytes = max_bytes
        self.max_frames = max_frames
        self.frames: collections.deque[Frame] = collections.deque()
        self.bytes = 0
        self.last_seq = 0
        self.terminal: Frame | None = None  # the runtime's record, once there
        self.fenced = False  # a newer kernel started: only the record may still come
        self.finished_at: float | None = None
        self.ended = asyncio.Event()  # set with the runtime's record
        self._changed = asyncio.Event()

    @property
    def first_seq(self) -> int:
        """The number of the oldest frame held (``last_seq + 1`` when none is)."""
        return self.frames[0].seq if self.frames else self.last_seq + 1

    def append(self, event: events.WatchEvent | events.Resync, size: int, gen: int) -> Frame | None:
        """Add an event; None when the journal takes no more (ended, or fenced and this is
        not the record)."""
        terminal = event.type == TERMINAL
        if self.terminal is not None or (self.fenced and not terminal):
            return None
        self.last_seq += 1
        frame = Frame(self.last_seq, gen, event, size)
        self.frames.append(frame)
        self.bytes += size
        while len(self.frames) > 1 and (
            self.bytes > self.max_bytes or len(self.frames) > self.max_frames
        ):
            self.bytes -= self.frames.popleft().size
        if terminal:
            self.terminal = frame
            self.finished_at = time.monotonic()
            self.ended.set()
        self._wake()
        return frame

    def fence(self) -> None:
        """A newer kernel started: from now on only the runtime's record ends this journal."""
        if not self.fenced:
            self.fenced = True
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def after(self, seq: int) -> list[Frame] | None:
        """The frames after ``seq``; None when some of them were dropped already."""
        if seq < self.first_seq - 1:
            return None
        return [frame for frame in self.frames if frame.seq > seq]

    def changed(self) -> asyncio.Event:
        """Set by the next frame (or fence): take it before looking, wait on it after."""
        return self._changed


class JournalReader:
    """One client's view of a journal from ``after`` on: frames as they come, or a None
    once the ring moved past what it had read (the client needs a resync). Closing it (the
    client went away) ends the iteration."""

    def __init__(
        self, journal: CellJournal, after: int, closed: asyncio.Event | None = None
    ) -> None:
        self.journal = journal
        self.seq = after
        self._closed = closed or asyncio.Event()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        self._closed.set()

    async def frames(self) -> AsyncIterator[Frame | None]:
        """Frames after the last one read; one None and the end when the ring moved on."""
        journal = self.journal
        while not self.closed:
            waiting = asyncio.ensure_future(journal.changed().wait())  # taken before reading
            try:
                frames = journal.after(self.seq)
                if frames is None:
                    yield None
                    return
                for frame in frames:
                    self.seq = frame.seq
                    yield frame
                    if frame is journal.terminal:
                        return
                if journal.terminal is not None and self.seq >= journal.terminal.seq:
                    return
                closing = asyncio.ensure_future(self._closed.wait())
                try:
                    await asyncio.wait({waiting, closing}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    closing.cancel()
            finally:
                waiting.cancel()

    async def follow(self, resync: Callable[[], Awaitable[events.Resync]]) -> AsyncIterator[Frame]:
        """Frames until the cell's record; where the ring moved past this reader, one frame
        of ``resync()`` (the cell as it stands, asked for with nothing awaited since the
        reader's last look), numbered as the latest, and on from there (or the end, when the
        cell ended)."""
        journal = self.journal
        while True:
            behind = False
            async for frame in self.frames():
                if frame is None:
                    behind = True
                    break
                yield frame
            if not behind:
                return
            self.seq = journal.last_seq
            yield Frame(self.seq, journal.gen, await resync())
            if journal.terminal is not None:
                return


class Journals:
    """The journals of one pad's cells, by id: open ones, and finished ones for a while."""

    def __init__(self) -> None:
        self.by_id: dict[str, CellJournal] = {}
        self.generation = 0
        self.attached = 0  # cell streams open now (a pad with one must not sleep)
        self._opened = asyncio.Event()

    def get(self, cell_id: str) -> CellJournal | None:
        return self.by_id.get(cell_id)

    def open(self, cell_id: str) -> CellJournal:
        """The journal of a cell (a new one unless the cell is on its way again, e.g. rerun
        after an install)."""
        journal = self.by_id.get(cell_id)
        if journal is None or journal.terminal is not None:
            self.by_id.pop(cell_id, None)  # a new cell of a reused id starts over
            journal = self.by_id[cell_id] = CellJournal(cell_id, self.generation)
            self._prune()
            self._opened.set()
            self._opened = asyncio.Event()
        return journal

    async def wait_open(self, cell_id: str, until: asyncio.Future[Any]) -> CellJournal | None:
        """The cell's journal once it is open and has not ended (the cell was queued); None
        when ``until`` is done first (the cell failed before it was queued, or no wait)."""
        while not until.done():
            opened = asyncio.ensure_future(self._opened.wait())  # taken before looking
            try:
                journal = self.by_id.get(cell_id)
                if journal is not None and journal.terminal is None:
                    return journal
                await asyncio.wait({opened, until}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                opened.cancel()
        return None

    def add(self, cell_id: str, event: events.WatchEvent | events.Resync, size: int) -> None:
        """An event of a cell: of the generation it runs in (its record too, written after
        a new kernel replaced the one that died under it), else the current one."""
        journal = self.by_id.get(cell_id)
        if journal is None:
            journal = self.open(cell_id)
        journal.append(event, size, journal.gen if journal.ran else self.generation)

    def started(self, cell_id: str) -> None:
        """A cell started in the current generation; journals of older generations that
        have not ended are fenced."""
        journal = self.open(cell_id)
        journal.gen, journal.ran = self.generation, True
        for other in self.by_id.values():
            if other.ran and other.terminal is None and other.gen < self.generation:
                other.fence()  # it ran in a kernel that is gone: only its record may come

    def set_generation(self, gen: int) -> None:
        self.generation = max(self.generation, gen)

    def active(self) -> list[CellJournal]:
        return [journal for journal in self.by_id.values() if journal.terminal is None]

    def finished(self) -> list[CellJournal]:
        """Finished journals, newest first."""
        done = [journal for journal in self.by_id.values() if journal.terminal is not None]
        return sorted(done, key=lambda journal: journal.finished_at or 0.0, reverse=True)

    def _prune(self) -> None:
        """Drop finished journals past their time, their count or their bytes (the record on
        disk is the truth then: a client gets a resync)."""
        now = time.monotonic()
        held = 0
        for index, journal in enumerate(self.finished()):
            ended = journal.finished_at or now
            held += journal.bytes
            if index >= KEEP_FINISHED or now - ended > KEEP_S or held > FINISHED_BYTES:
                del self.by_id[journal.cell_id]
