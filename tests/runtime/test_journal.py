"""Per-cell journals (runtime/journal.py) as the pad watch feeds them: numbering, bounds, the
generation fence, and a reader that falls off the ring."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from scratchpad.events import FeedOutput, FeedStarted, from_item
from scratchpad.runtime.cell import Cell, OutputEvent
from scratchpad.runtime.journal import CellJournal, Frame, JournalReader
from scratchpad.runtime.watch import PadWatch


def _out(text: str) -> FeedOutput:
    return FeedOutput(id="c", stream="stdout", text=text)


def kernel_of(generation: int) -> Any:
    """A pad as the watch's ``status`` sees it after a kernel start."""
    return SimpleNamespace(generation=generation, name="p")


def test_every_event_of_a_cell_is_numbered_from_1_and_the_record_ends_it() -> None:
    watch = PadWatch("p")
    cell = Cell(code="print(1)", id="c1", number=1)
    watch.queued(cell)
    watch.started(cell)
    watch.seen([OutputEvent("stdout", "1\n")])
    journal = watch.journals.get("c1")
    assert journal is not None and journal.terminal is None
    cell.stdout = "1\n"
    watch.recorded(cell)
    assert [f.seq for f in journal.frames] == [1, 2, 3, 4]
    assert [f.event.type for f in journal.frames] == ["queued", "started", "output", "cell"]
    assert journal.terminal is journal.frames[-1] and journal.ended.is_set()
    assert journal.append(_out("late"), 4, 0) is None  # ended


def test_the_ring_drops_its_oldest_frames_and_first_seq_says_so() -> None:
    journal = CellJournal("c", 0, max_bytes=100, max_frames=10)
    for _ in range(25):
        journal.append(_out("x" * 5), 5, 0)
    assert (journal.first_seq, journal.last_seq, len(journal.frames)) == (16, 25, 10)
    assert journal.after(15) == list(journal.frames)
    assert journal.after(14) is None  # frame 15 is gone: a resync
    for _ in range(3):
        journal.append(_out("y" * 60), 60, 0)
    assert journal.bytes <= 100 and journal.first_seq == 28  # two would not fit


def test_a_newer_kernel_fences_the_cells_of_the_old_one_until_their_record() -> None:
    watch = PadWatch("p")
    watch.status(kernel_of(1))
    victim, waiting, successor = (Cell(code="", id=i) for i in ("victim", "waiting", "next"))
    watch.queued(victim)
    watch.started(victim)
    watch.queued(waiting)  # queued in generation 1, starts in generation 2
    watch.status(kernel_of(2))  # the kernel died and a new one started
    watch.started(successor)
    watch.seen([OutputEvent("stdout", "of the successor\n")])
    old = watch.journals.get("victim")
    assert old is not None and old.fenced and old.gen == 1
    assert old.append(_out("after the death"), 1, 2) is None
    victim.status = "killed"
    watch.recorded(victim)  # the runtime's record still ends it
    assert old.terminal is not None and old.terminal.cell().status == "killed"
    assert {f.gen for f in old.frames} == {1}  # its record too: it ran in generation 1
    assert "successor" not in str([f.event for f in old.frames])
    watch.started(waiting)
    later = watch.journals.get("waiting")
    assert later is not None and not later.fenced and later.gen == 2
    assert [f.gen for f in later.frames] == [1, 2]  # queued in 1, started in 2


async def test_a_reader_follows_live_and_gets_none_when_the_ring_moved_on() -> None:
    journal = CellJournal("c", 0, max_bytes=10**6, max_frames=3)
    journal.append(FeedStarted(id="c", number=1, started_at=0.0), 0, 0)
    reader = JournalReader(journal, 0)
    got: list[Frame | None] = []

    async def read() -> None:
        async for frame in reader.frames():
            got.append(frame)

    task = asyncio.create_task(read())
    await asyncio.sleep(0)
    journal.append(_out("a"), 1, 0)
    journal.append(from_item("c", Cell(code="", id="c")), 0, 0)
    await asyncio.wait_for(task, 5)
    assert [f.seq for f in got if f is not None] == [1, 2, 3]
    for _ in range(5):
        journal.append(_out(""), 0, 0)  # after the end: not taken
    behind = CellJournal("d", 0, max_frames=2)
    for _ in range(4):
        behind.append(_out(""), 0, 0)
    assert [f async for f in JournalReader(behind, 1).frames()] == [None]


async def test_a_closed_reader_stops_waiting() -> None:
    journal = CellJournal("c", 0)
    closed = asyncio.Event()
    reader = JournalReader(journal, 0, closed)
    task = asyncio.create_task(anext(reader.frames(), "ended"))
    await asyncio.sleep(0.01)
    closed.set()
    assert await asyncio.wait_for(task, 5) == "ended"
