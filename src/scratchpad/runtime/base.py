"""The runtime contract every pad backend implements (local now, remote over HTTP later)."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from scratchpad.errors import InvalidInputError, PadError
from scratchpad.padnames import validate_pad_name
from scratchpad.runtime import render
from scratchpad.runtime.cell import CELL_ID, Cell, StreamItem, new_cell_id
from scratchpad.runtime.timeouts import check_estimate, check_timeout
from scratchpad.scrub import scrub
from scratchpad.text import clean_text, cut_middle

if TYPE_CHECKING:
    from scratchpad.runtime.handle import CellHandle

DEFAULT_COMPACT_KEEP = 5
CLOSED = "the pad was closed"


@dataclass(frozen=True, slots=True)
class PadLLM:
    """The model that cells of one pad reach through ``get_llm()`` (the remote-backend
    protocol's ``coding_*`` fields of ``start``); empty fields keep the server's own."""

    provider: str = ""
    model: str = ""
    api_key: str = ""
    base_url: str = ""


class ScratchpadRuntime(ABC):
    """A named, persistent Python environment driven like a notebook.

    ``close()`` stops the process and keeps the environment; ``cleanup()`` destroys both.
    ``execute()`` drains ``execute_streaming()``: progress/output events, then one Cell.
    """

    def __init__(self, name: str, *, compact_keep: int = DEFAULT_COMPACT_KEEP) -> None:
        self.name = validate_pad_name(name)
        self._cells: list[Cell] = []
        self.compact_keep = compact_keep

    @property
    def cells(self) -> list[Cell]:
        """The pad's recorded cells, oldest first."""
        return self._cells

    @cells.setter
    def cells(self, cells: list[Cell]) -> None:
        self._cells = cells

    async def load_cells(self) -> list[Cell]:
        """The cells, fetched from where the backend keeps them (disk, a server) if needed."""
        return self.cells

    @abstractmethod
    async def start(self) -> None:
        """Make the pad ready to run cells (create its environment, start its kernel)."""

    @abstractmethod
    async def reset(self) -> None:
        """Restart the process: variables and cells are cleared, installed packages stay."""

    @abstractmethod
    async def close(self, *, reason: str = CLOSED) -> None:
        """Stop the process; keep the environment for the next start. A running cell ends
        saying ``reason`` and what became of its variables (a backend with checkpoints brings
        back those of the last finished cell at the next start)."""

    async def detach(self) -> None:
        """Let go of the pad, leaving it running where it can outlive this process (a remote
        pad); a local pad's kernel belongs to this process, so it is closed."""
        await self.close()

    async def rescrub(self) -> tuple[int, bool]:
        """Scrub the recorded cells again with the process's scrubber (a secret was added):
        those in memory, in place, and the history file. How many cells in memory changed,
        and whether the file did. A pad whose cells live elsewhere (a remote pad: its server
        scrubs them) has nothing to do here."""
        return 0, False

    @abstractmethod
    async def cancel(self, cell_id: str | None = None) -> bool:
        """Cancel cell ``cell_id``: a queued one is removed and never runs, a running one is
        interrupted (its variables are kept when the interrupt works). Without an id, the
        running cell. False when there was no such cell to cancel."""

    @abstractmethod
    async def configure_llm(self, llm: PadLLM) -> None:
        """Set the model that this pad's cells reach through ``get_llm()``."""

    async def sleep_if_idle(self, now: float) -> bool:
        """Stop the pad's processes when it has been idle long enough at ``now`` (epoch
        seconds) and nothing runs, waits or watches it; its next use wakes it. Whether it
        went to sleep (backends that do not sleep: never)."""
        return False

    async def revert(self) -> int:
        """Put the namespace back as it was before the last cell that changed it (from its
        checkpoints); that cell stays in the history. The number of the cell whose variables
        are current now. PadBusyError while a cell runs or waits; InvalidInputError when
        nothing can be reverted."""
        raise PadError(
            f"pad {self.name!r}: its backend ({type(self).__name__}) cannot revert; use a "
            "local pad, or a server that has POST /scratchpad/revert"
        )

    async def fork_into(self, target: ScratchpadRuntime) -> None:
        """Make ``target`` (a new pad of the same backend, not started) a copy of this one:
        its packages, variables and cells (see ScratchpadManager.fork)."""
        raise PadError(
            f"pad {self.name!r}: its backend ({type(self).__name__}) cannot fork pads; use a "
            "local pad, or POST /v1/pads/{name}/fork on its server"
        )

    @abstractmethod
    async def cleanup(self) -> None:
        """Stop the process and delete the environment and everything of the pad."""

    @abstractmethod
    async def install_packages(self, packages: list[str]) -> str:
        """Install packages into the pad; returns the installer's output."""

    @abstractmethod
    def execute_streaming(
        self,
        code: str,
        *,
        description: str = "",
        estimated_time: str = "",
        estimated_seconds: float = 0.0,
        timeout_s: float | None = None,
        cell_id: str | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        """Run ``code``; yields progress/output/display events, then exactly one Cell.

        ``timeout_s`` is a hard limit (else one follows from ``estimated_seconds``).
        ``cell_id`` names the cell from the start, so it can be cancelled while queued; a
        second submit with the id of a known cell gives that cell, it does not run again.
        """

    @property
    @abstractmethod
    def busy(self) -> bool:
        """True while a cell is running."""

    def knows(self, cell_id: str) -> bool:
        """Whether a cell with this id was already submitted (where the backend knows)."""
        return False

    @property
    def queued(self) -> int:
        """Cells waiting for their turn (where the backend knows)."""
        return 0

    @property
    @abstractmethod
    def closed(self) -> bool:
        """True after close() or cleanup(), until start() runs again."""

    async def execute(
        self,
        code: str,
        *,
        description: str = "",
        estimated_time: str = "",
        estimated_seconds: float = 0.0,
        timeout_s: float | None = None,
        cell_id: str | None = None,
        on_event: Callable[[StreamItem], Any] | None = None,
    ) -> Cell:
        """Run ``code`` and return its Cell (events go to ``on_event`` when given)."""
        cell: Cell | None = None
        async for item in self.execute_streaming(
            code,
            description=description,
            estimated_time=estimated_time,
            estimated_seconds=estimated_seconds,
            timeout_s=timeout_s,
            cell_id=cell_id,
        ):
            if isinstance(item, Cell):
                cell = item
            elif on_event is not None:
                on_event(item)
        if cell is None:
            raise PadError(f"pad {self.name!r} ended a cell without a result; run it again")
        return cell

    async def start_cell(
        self,
        code: str,
        *,
        description: str = "",
        estimated_time: str = "",
        estimated_seconds: float = 0.0,
        timeout_s: float | None = None,
        cell_id: str | None = None,
    ) -> CellHandle:
        """Run ``code`` without waiting for it: a handle on the cell (see handle.py) once it
        is on its way. ``cell_id`` names it (a repeat of a known id is that cell)."""
        from scratchpad.runtime import handle

        options = {
            "description": description, "estimated_time": estimated_time,
            "estimated_seconds": estimated_seconds, "timeout_s": timeout_s,
        }  # fmt: skip
        return await handle.start(self, code, check_cell_id(cell_id) or new_cell_id(), options)

    async def cell(self, cell_id: str) -> CellHandle:
        """A handle on cell ``cell_id`` (queued, running or recorded), whoever started it;
        PadNotFoundError when the pad has none."""
        from scratchpad.runtime import handle

        return await handle.find(self, str(check_cell_id(cell_id)))

    # -- views shared by every backend ----------------------------------------------------
    def view(self) -> str:
        return render.view(self.name, self.cells, self.compact_keep)

    def dump(self) -> str:
        return render.dump(self.name, self.cells)

    def to_ipynb(self) -> dict[str, Any]:
        return render.to_ipynb(self.name, self.cells)

    def compact(self, keep: int | None = None) -> None:
        """Fold all but the last ``keep`` cells into one summary cell (in memory)."""
        self.cells = render.compact_cells(self.cells, keep or self.compact_keep)

    async def __aenter__(self) -> ScratchpadRuntime:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


@dataclass(frozen=True, slots=True)
class CellRequest:
    """Execute arguments, checked and with their text cleaned (see scratchpad.text)."""

    code: str
    description: str
    estimated_time: str
    estimated_seconds: float
    cell_id: str | None
    timeout_s: float | None = None


def check_execute_args(
    code: object,
    description: object,
    estimated_seconds: object,
    estimated_time: object = "",
    cell_id: object = None,
    timeout_s: object = None,
) -> CellRequest:
    """Shared validation of execute arguments; the message says what to pass instead. The
    timeout's upper limit is the runtime's to check (a remote one leaves it to its server)."""
    if not isinstance(code, str):
        raise InvalidInputError(
            f"code must be a string of Python source, not {type(code).__name__}"
        )
    if not isinstance(description, str):
        raise InvalidInputError("description must be a string")
    if not isinstance(estimated_time, str):
        raise InvalidInputError("estimated_time must be a string, e.g. '30s'")
    estimate = check_estimate(estimated_seconds)
    cell_id = check_cell_id(cell_id)
    if not estimated_time and estimate:
        estimated_time = f"{estimate:g}s"
    return CellRequest(
        code=clean_text(code),
        description=clean_text(description),
        estimated_time=clean_text(estimated_time),
        estimated_seconds=estimate,
        cell_id=cell_id,
        timeout_s=None if timeout_s is None else check_timeout(timeout_s),
    )


RuntimeFactory = Callable[[str], ScratchpadRuntime]
"""Builds the runtime of a pad from its name; the manager's seam for backends and fakes."""


def check_cell_id(cell_id: object) -> str | None:
    """None (the runtime picks an id) or 1-64 letters, digits, '_' or '-' that hold no secret
    value (an id is shown as it is everywhere: streams, history, feeds, notebooks)."""
    if cell_id is None:
        return None
    if not isinstance(cell_id, str) or not CELL_ID.fullmatch(cell_id):
        shown = cut_middle(scrub(repr(cell_id)), 80)
        raise InvalidInputError(
            f"cell id {shown} is not allowed: use 1-64 letters, digits, '_' or '-'"
        )
    shown = scrub(cell_id)
    if shown != cell_id:
        raise InvalidInputError(
            f"cell id {shown!r} is not allowed: it holds a secret value (shown as its label); "
            "pick an id without it"
        )
    return cell_id


async def take_turn(lock: asyncio.Lock, cancelled: asyncio.Event) -> bool:
    """Acquire ``lock`` in FIFO order unless ``cancelled`` is set first; True when held."""
    if lock.locked():
        acquiring = asyncio.ensure_future(lock.acquire())
        waiting = asyncio.ensure_future(cancelled.wait())
        try:
            await asyncio.wait({acquiring, waiting}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the caller went away while it waited
            _let_go(lock, acquiring)
            raise
        finally:
            waiting.cancel()
        if cancelled.is_set():
            _let_go(lock, acquiring)
            return False
    else:
        await lock.acquire()
    if cancelled.is_set():  # cancelled in the instant the lock came free
        lock.release()
        return False
    return True


def _let_go(lock: asyncio.Lock, acquiring: asyncio.Future[Any]) -> None:
    """Give up an acquisition, releasing the lock if it was already granted."""
    if acquiring.done() and not acquiring.cancelled() and acquiring.exception() is None:
        lock.release()
    else:
        acquiring.cancel()
