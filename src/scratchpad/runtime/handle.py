"""A handle on a cell that runs whether or not its caller waits: ``await pad.start(code)``.

The handle is the cell's id plus a way to look: :meth:`CellHandle.peek` (how it stands),
:meth:`~CellHandle.wait` (the recorded cell, or None when it still runs after ``timeout``:
never an exception for that), :meth:`~CellHandle.events` (numbered frames, from any point),
:meth:`~CellHandle.cancel`. A pad with a live watch (a local pad) serves them from the cell's
journal (runtime/journal.py), so ``pad.cell(id)`` finds a cell whoever started it; any other
backend gets the same API from ``execute_streaming`` drained in a task of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from scratchpad import events
from scratchpad.errors import PadNotFoundError
from scratchpad.events import Resync
from scratchpad.runtime.cell import Cell
from scratchpad.runtime.journal import CellJournal, Frame, JournalReader

if TYPE_CHECKING:
    from scratchpad.runtime.base import ScratchpadRuntime
    from scratchpad.runtime.watch import PadWatch

_running: set[asyncio.Task[Any]] = set()  # cells started by handles: nobody need await them


class CellHandle:
    """One cell of ``pad``, by id: running, queued or recorded."""

    def __init__(self, pad: ScratchpadRuntime, cell_id: str, journal: CellJournal) -> None:
        self.pad = pad
        self.id = cell_id
        self.journal = journal
        self._cell: Cell | None = None

    @classmethod
    def recorded(cls, pad: ScratchpadRuntime, cell: Cell) -> CellHandle:
        """A handle on a cell that ended long ago (its journal: the record alone)."""
        journal = CellJournal(cell.id, 0)
        journal.append(events.from_item(cell.id, cell), 0, 0)
        handle = cls(pad, cell.id, journal)
        handle._cell = cell
        return handle

    async def peek(self) -> Cell | events.QueuedCell | events.RunningCell:
        """The recorded cell once it ended, else how it stands: queued, or running with what
        it printed so far where the pad's watch knows it (with ``gen`` and ``last_seq``)."""
        if (cell := self._ended()) is not None:
            return cell
        now = as_it_stands(getattr(self.pad, "watch", None), self.id, self.journal)
        if isinstance(now, events.RecordedCell):  # recorded since the look above
            return self._ended() or Cell.from_dict(events.wire(now))
        return now or unknown(self.id, self.journal)

    async def wait(self, timeout: float | None = None) -> Cell | None:
        """The recorded cell; None when it still runs after ``timeout`` seconds."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.journal.ended.wait()
        return self._ended()

    async def events(self, after: int = 0) -> AsyncIterator[Frame]:
        """The cell's frames after number ``after``, live, ending with its record; a frame of
        type ``resync`` (the cell as it stands) where the bounded journal moved on."""

        async def resync() -> Resync:
            return self._resync()

        async for frame in JournalReader(self.journal, after).follow(resync):
            yield frame

    async def cancel(self) -> bool:
        """Cancel the cell (queued: it never runs; running: interrupted)."""
        return await self.pad.cancel(self.id)

    def _resync(self) -> Resync:
        """The cell as it stands, for a reader the journal left behind."""
        if (cell := self._ended()) is not None:
            journal = self.journal
            return Resync(cell=events.recorded(events.cell_of(cell), journal.gen, journal.last_seq))
        now = as_it_stands(getattr(self.pad, "watch", None), self.id, self.journal)
        return Resync(cell=now or unknown(self.id, self.journal))

    def _ended(self) -> Cell | None:
        if self._cell is None and self.journal.terminal is not None:
            self._cell = Cell.from_dict(events.wire(self.journal.terminal.cell()))
        return self._cell


async def start(
    pad: ScratchpadRuntime, code: str, cell_id: str, options: dict[str, Any]
) -> CellHandle:
    """Run ``code`` in ``pad`` in a task of its own; the handle once the cell is on its way
    (queued, where the pad's watch says so)."""
    journals = getattr(getattr(pad, "watch", None), "journals", None)
    own = CellJournal(cell_id, 0)  # a backend without a watch: the handle's own journal

    async def run() -> None:
        async for item in pad.execute_streaming(code, cell_id=cell_id, **options):
            if journals is None:
                own.append(events.from_item(cell_id, item), 0, 0)

    task = asyncio.get_running_loop().create_task(run())
    _running.add(task)
    task.add_done_callback(_running.discard)
    if journals is None:
        return CellHandle(pad, cell_id, own)
    journal = await journals.wait_open(cell_id, task)
    if journal is not None:
        return CellHandle(pad, cell_id, journal)
    task.result()  # it failed before it was queued: say why
    return await find(pad, cell_id)  # it ended already


async def find(pad: ScratchpadRuntime, cell_id: str) -> CellHandle:
    """A handle on cell ``cell_id`` of ``pad``: from its journal, else its record."""
    journals = getattr(getattr(pad, "watch", None), "journals", None)
    journal = None if journals is None else journals.get(cell_id)
    if journal is not None:
        return CellHandle(pad, cell_id, journal)
    for cell in reversed(await pad.load_cells()):
        if cell.id == cell_id:
            return CellHandle.recorded(pad, cell)
    raise PadNotFoundError(f"pad {pad.name!r} has no cell {cell_id[:80]!r}")


def as_it_stands(
    watch: PadWatch | None, cell_id: str, journal: CellJournal | None
) -> events.QueuedCell | events.RunningCell | events.RecordedCell | None:
    """Cell ``cell_id`` as it stands: recorded (its journal's record), running (what it
    printed so far), queued; None when neither the journal nor the pad's watch knows it."""
    gen, last_seq = (None, None) if journal is None else (journal.gen, journal.last_seq)
    if journal is not None and journal.terminal is not None:
        return events.recorded(journal.terminal.cell(), gen, last_seq)
    if watch is None:
        return None
    running = watch.running
    if running is not None and running.cell.id == cell_id:
        return events.running(running.state(), gen, last_seq)
    queued = watch.queue.get(cell_id)
    if queued is not None:
        from scratchpad.runtime.watch import brief

        return events.queued(brief(queued), gen, last_seq)
    return None


def unknown(cell_id: str, journal: CellJournal) -> events.RunningCell:
    """A cell on its way that the pad's watch cannot tell about (followed from elsewhere,
    or between the queue and its start): running, nothing known of its output."""
    state = events.RunningState.model_construct(
        id=cell_id, number=0, code="", description="", started_at=0.0, stdout="", stderr="",
        displays=[], displays_dropped=0, progress=None,
    )  # fmt: skip
    return events.running(state, journal.gen, journal.last_seq)
