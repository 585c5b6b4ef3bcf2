"""A pad's live feed: every client (a browser tab, a CLI, an agent over MCP) can watch the
cells of a pad as they run, whoever submitted them.

The runtime feeds its :class:`PadWatch` as things happen (queued, started, output, display,
progress, the recorded cell, the pad's status); the watch keeps the state of the running
cell and the queue (so a subscriber arriving mid-cell gets a snapshot of the output so far)
and hands every event to its subscribers. Publishing never waits: each subscriber has a
bounded buffer, and one that falls behind gets ``{"type": "overflow"}`` and is closed (it
reconnects and takes a fresh snapshot). Nobody watching costs a few attribute updates a
cell.

Text in events is scrubbed: output, displays and progress where they enter the core (see
cellrun.py), the code and description of a queued cell here.
"""

from __future__ import annotations

import asyncio
import collections
import time
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from scratchpad import events
from scratchpad.events import CellBrief, RunningState, WatchState
from scratchpad.runtime.cell import (
    CappedOutput,
    Cell,
    DisplayEvent,
    OutputEvent,
    ProgressEvent,
    StreamItem,
    bundle_size,
)
from scratchpad.runtime.journal import Journals
from scratchpad.scrub import scrub
from scratchpad.text import cut_middle

if TYPE_CHECKING:
    from scratchpad.runtime.base import ScratchpadRuntime
    from scratchpad.runtime.kernel import KernelProcess

Event = events.PadEvent
SNAPSHOT_OUTPUT_BYTES = 256 * 1024  # per stream: head + tail of what the running cell printed
DISPLAYS_KEPT = 32  # the running cell's latest displays, for a snapshot
DISPLAYS_KEPT_CHARS = 8 * 1024 * 1024
PIECE_CHARS = 64 * 1024  # output events are at most this long (a 1 MiB read is 16 of them)
CODE_CHARS = 64 * 1024  # of a queued or running cell's code in an event (head + tail)
# What one subscriber may have waiting before it overflows: output, progress and display
# text it alone holds (a recorded cell is shared with the pad's history, so it counts 0).
BUFFER_CHARS = 2 * 1024 * 1024
BUFFER_EVENTS = 10_000
DEATH_REAP_S = 2.0  # how long a dead kernel's exit code is waited for, to say the cause
OVERFLOW = events.FeedOverflow()
GONE_BEFORE_TURN = "Cell cancelled before it started: its caller went away; nothing ran.\n"
_deaths: set[asyncio.Task[None]] = set()


class Subscription:
    """One subscriber's events, in order, from a bounded buffer. Iterate it (it ends once
    closed), or :meth:`get` one at a time (None once closed and drained)."""

    def __init__(self, watch: PadWatch, *, max_chars: int, max_events: int) -> None:
        self.watch = watch  # held: a watch lives while someone subscribes to it
        self.max_chars = max_chars
        self.max_events = max_events
        self.closed = False
        self.overflowed = False
        self._events: collections.deque[tuple[Event, int]] = collections.deque()
        self._chars = 0
        self._waiter: asyncio.Future[None] | None = None

    def put(self, event: Event, size: int) -> None:
        """Queue ``event`` (``size``: about its characters); past the bounds, overflow."""
        if self.closed:
            return
        self._events.append((event, size))
        self._chars += size
        if self._chars > self.max_chars or len(self._events) > self.max_events:
            self._events.clear()
            self._events.append((OVERFLOW, 0))
            self._chars = 0
            self.overflowed = True
            self.close()
        self._wake()

    async def get(self) -> Event | None:
        """The next event, waiting for one; None once the subscription is closed and empty."""
        while not self._events:
            if self.closed:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        event, size = self._events.popleft()
        self._chars -= size
        return event

    def close(self) -> None:
        """Stop receiving; what is queued can still be read."""
        if not self.closed:
            self.closed = True
            self.watch.unsubscribe(self)
            self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        try:
            while (event := await self.get()) is not None:
                yield event
        finally:
            self.close()


class RunningCell:
    """The running cell as far as its watchers know it (bounded: head + tail per stream,
    the latest displays, the last progress message)."""

    def __init__(self, cell: Cell, started_at: float) -> None:
        self.cell = cell
        self.started_at = started_at
        self.outputs: dict[str, CappedOutput] = {}
        self.displays: collections.deque[tuple[dict[str, Any], int]] = collections.deque()
        self.displays_chars = 0
        self.displays_dropped = 0
        self.progress: str | None = None

    def add(self, item: StreamItem) -> None:
        if isinstance(item, OutputEvent):
            buffer = self.outputs.get(item.stream)
            if buffer is None:
                buffer = self.outputs[item.stream] = CappedOutput(SNAPSHOT_OUTPUT_BYTES)
            buffer.append(item.text.encode("utf-8", "replace"))
        elif isinstance(item, ProgressEvent):
            self.progress = item.message
        elif isinstance(item, DisplayEvent):
            size = bundle_size(item.data)
            self.displays.append((item.data, size))
            self.displays_chars += size
            while len(self.displays) > 1 and (
                len(self.displays) > DISPLAYS_KEPT or self.displays_chars > DISPLAYS_KEPT_CHARS
            ):
                self.displays_chars -= self.displays.popleft()[1]
                self.displays_dropped += 1

    def state(self) -> RunningState:
        """The snapshot of this cell: what its watchers were told so far."""
        return RunningState.model_construct(
            **dict(brief(self.cell)),
            started_at=self.started_at,
            stdout=self._text("stdout"),
            stderr=self._text("stderr"),
            displays=[data for data, _ in self.displays],
            displays_dropped=self.displays_dropped,
            progress=self.progress,
        )

    def _text(self, stream: str) -> str:
        buffer = self.outputs.get(stream)
        return "" if buffer is None else buffer.text()


def brief(cell: Cell) -> CellBrief:
    """``{id, number, code, description}`` of a cell not recorded yet, scrubbed and cut to
    size."""
    return CellBrief.model_construct(
        id=cell.id,
        number=cell.number,
        code=cut_middle(scrub(cell.code), CODE_CHARS),
        description=cut_middle(scrub(cell.description), CODE_CHARS),
    )


class PadWatch:
    """The live feed of one pad name (it outlives the pad's runtimes: a reset, a restart, a
    removal and a re-creation are watched by the same subscribers)."""

    __slots__ = (
        "__weakref__", "_subscribers", "journals", "last_activity", "name", "queue", "running",
    )  # fmt: skip

    def __init__(self, name: str) -> None:
        self.name = name
        self.queue: dict[str, Cell] = {}  # cells waiting for their turn, by id
        self.running: RunningCell | None = None
        self.last_activity: float | None = None  # when a cell last started or ended
        self._subscribers: list[Subscription] = []
        self.journals = Journals()  # each cell's numbered events, for clients that come back

    @property
    def watched(self) -> bool:
        return bool(self._subscribers)

    @property
    def attached(self) -> bool:
        """Whether a client follows a cell's stream now (the pad must not sleep)."""
        return self.journals.attached > 0

    def subscribe(
        self, *, max_chars: int = BUFFER_CHARS, max_events: int = BUFFER_EVENTS
    ) -> Subscription:
        """A new subscriber: it gets every event published from now on (take the
        :meth:`state` in the same step, before awaiting anything, to start from)."""
        subscription = Subscription(self, max_chars=max_chars, max_events=max_events)
        self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)

    def close_all(self) -> None:
        """End every subscription (the server is stopping)."""
        for subscription in list(self._subscribers):
            subscription.close()

    def state(self) -> WatchState:
        """What runs and what waits, as far as events published so far told."""
        running = self.running
        return WatchState.model_construct(
            running=None if running is None else running.state(),
            queued=[brief(cell) for cell in self.queue.values()],
        )

    # -- fed by the runtime -----------------------------------------------------------------
    def queued(self, cell: Cell) -> None:
        self.queue[cell.id] = cell
        event = events.FeedQueued.model_construct(cell=brief(cell))
        self.journals.open(cell.id).append(event, len(cell.code), self.journals.generation)
        if self._subscribers:
            self._publish(event, len(cell.code))

    def started(self, cell: Cell) -> None:
        self.queue.pop(cell.id, None)
        now = self.last_activity = time.time()
        self.running = RunningCell(cell, now)
        event = events.FeedStarted.model_construct(id=cell.id, number=cell.number, started_at=now)
        self.journals.started(cell.id)
        self.journals.add(cell.id, event, 0)
        if self._subscribers:
            self._publish(event, 0)

    def seen(self, items: list[StreamItem]) -> list[StreamItem]:
        """Stream items of the running cell (the Cell among them is published once it is
        recorded, see :meth:`recorded`); returns ``items``."""
        running = self.running
        if running is None:
            return items
        for item in items:
            if not isinstance(item, Cell):
                running.add(item)
                for event, size in _item_events(running.cell.id, item):
                    self.journals.add(running.cell.id, event, size)
                    if self._subscribers:
                        self._publish(event, size)
        return items

    def recorded(self, cell: Cell) -> None:
        """The cell ended (recorded, or never ran)."""
        self.queue.pop(cell.id, None)
        if self.running is not None and self.running.cell.id == cell.id:  # (a relayed copy)
            self.running = None
        self.last_activity = time.time()
        event = events.from_item(cell.id, cell)
        self.journals.add(cell.id, event, 0)  # the runtime's record: the journal's end
        if self._subscribers:
            self._publish(event, 0)

    def gone(self, cell: Cell) -> None:
        """A queued cell whose caller went away before its turn: it never runs and is not
        recorded; its watchers see it end as cancelled."""
        if self.queue.pop(cell.id, None) is not None:
            ended = events.cell_of(cell, status="cancelled", error=GONE_BEFORE_TURN)
            event = events.FeedCell.model_construct(cell=ended)
            self.journals.add(cell.id, event, 0)
            if self._subscribers:
                self._publish(event, 0)

    def status(self, pad: ScratchpadRuntime, status: str | None = None) -> None:
        """The pad started (or restarted, or was reset), closed, was removed (``status``
        says so), or its kernel died: its watchers are told how it is now. The runtime calls
        it after each kernel start: the journals take the pad's kernel generation from it."""
        self.journals.set_generation(getattr(pad, "generation", 0))
        if self._subscribers:
            from scratchpad.runtime.padinfo import describe_now

            pad_now = events.watched_pad(describe_now(pad, self, status))
            gen = self.journals.generation
            self._publish(events.FeedStatus.model_construct(pad=pad_now, gen=gen), 0)

    def died(self, pad: ScratchpadRuntime, kernel: KernelProcess) -> None:
        """``pad``'s kernel closed its channel: unless it was stopped on purpose (not for a
        limit), its watchers hear of the death, with its cause, once the process is reaped."""
        stopped = kernel.killed_by_us and not kernel.protocol_error and not kernel.stop_reason
        if stopped or not self._subscribers or getattr(pad, "kernel", None) is not kernel:
            return
        task = asyncio.get_running_loop().create_task(self._after_death(pad, kernel))
        _deaths.add(task)
        task.add_done_callback(_deaths.discard)

    async def _after_death(self, pad: ScratchpadRuntime, kernel: KernelProcess) -> None:
        await kernel.wait_exit(DEATH_REAP_S)
        if getattr(pad, "kernel", None) is kernel:  # not restarted meanwhile
            self.status(pad)

    def _publish(self, event: Event, size: int) -> None:
        for subscription in list(self._subscribers):
            subscription.put(event, size)


def _item_events(cell_id: str, item: StreamItem) -> list[tuple[events.WatchEvent, int]]:
    """The events of one stream item (long output in pieces: a subscriber is never handed
    a big lump at once) with their sizes."""
    if isinstance(item, OutputEvent):
        text, stream = item.text, item.stream
        if len(text) <= PIECE_CHARS:
            return [(events.from_item(cell_id, item), len(text))]
        pieces = [text[at : at + PIECE_CHARS] for at in range(0, len(text), PIECE_CHARS)]
        return [
            (events.from_item(cell_id, OutputEvent(stream, piece)), len(piece)) for piece in pieces
        ]
    if isinstance(item, DisplayEvent):
        return [(events.from_item(cell_id, item), bundle_size(item.data))]
    assert isinstance(item, ProgressEvent)
    return [(events.from_item(cell_id, item), len(item.message))]


class PadWatches:
    """The watches of one manager's pads, by name; a watch lives while a runtime or a
    subscriber holds it."""

    def __init__(self) -> None:
        self._watches: weakref.WeakValueDictionary[str, PadWatch] = weakref.WeakValueDictionary()

    def get(self, name: str) -> PadWatch:
        watch = self._watches.get(name)
        if watch is None:
            watch = self._watches[name] = PadWatch(name)
        return watch

    def close_all(self) -> None:
        for watch in list(self._watches.values()):
            watch.close_all()
