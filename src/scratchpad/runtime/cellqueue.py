"""The cells of one pad between submission and record: one at a time, in submission order,
each known by its id from the start, so it can be cancelled while it waits (it never runs) and
a repeated submit can be recognised. The queue's lock is also what reset, close and installs
take, so they never overlap a cell.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from scratchpad.runtime.base import take_turn
from scratchpad.runtime.cell import Cell

CANCELLED_IDS_KEPT = 1024
NOT_RUN = "Cell cancelled before it started; nothing ran."


def remember(ids: dict[str, None], cell_id: str, keep: int) -> None:
    """Add ``cell_id`` to an insertion-ordered set of at most ``keep`` ids (oldest go)."""
    ids[cell_id] = None
    if len(ids) > keep:
        del ids[next(iter(ids))]


@dataclass(eq=False)
class Ticket:
    """A submitted cell from the moment it is queued until it is recorded."""

    cell: Cell
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    reason: str = ""
    finished: asyncio.Future[Cell] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def cancel(self, reason: str = NOT_RUN) -> None:
        if not self.cancelled.is_set():
            self.reason = reason
            self.cancelled.set()


class CellQueue:
    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.current: Ticket | None = None  # the cell that holds the lock
        self._tickets: dict[str, Ticket] = {}  # waiting and current cells, by id
        self._forbidden: dict[str, None] = {}  # ids cancelled before they came (newest last)

    @property
    def waiting(self) -> int:
        """Cells queued behind the current one."""
        return len(self._tickets) - (self.current is not None)

    def get(self, cell_id: str) -> Ticket | None:
        return self._tickets.get(cell_id)

    def others(self) -> list[Ticket]:
        """The waiting cells (not the current one)."""
        return [ticket for ticket in self._tickets.values() if ticket is not self.current]

    def forbid(self, cell_id: str) -> None:
        """A cell of this id, should it still come, is cancelled on arrival."""
        remember(self._forbidden, cell_id, CANCELLED_IDS_KEPT)

    def submit(self, cell: Cell) -> Ticket:
        ticket = Ticket(cell)
        self._tickets[cell.id] = ticket
        if cell.id in self._forbidden:
            del self._forbidden[cell.id]
            ticket.cancel()
        return ticket

    async def wait_turn(self, ticket: Ticket) -> bool:
        """Take the lock in submission order; False when cancelled while waiting."""
        if not await take_turn(self.lock, ticket.cancelled):
            return False
        self.current = ticket
        return True

    def done(self, ticket: Ticket) -> None:
        """The cell is recorded (or never ran): forget it, tell those who wait for it."""
        if self._tickets.get(ticket.cell.id) is ticket:
            del self._tickets[ticket.cell.id]
        if not ticket.finished.done():
            ticket.finished.set_result(ticket.cell)

    def release(self, ticket: Ticket) -> None:
        """The current cell is done: the next one may go."""
        self.current = None
        self.done(ticket)
        self.lock.release()
