"""A local pad's cells from submit to record: numbered as they are queued, a repeated id
answered with the cell it names, each run in its turn on the pad's kernel (with
``SCRATCHPAD_AUTO_INSTALL``, run again as the same cell after installing a missing module),
finished in the background when its caller goes away, and recorded: written to the history
before anyone hears of it (one that could not be written is answered saying so).

The recorded cells live here too (read from the history on first use, indexed by id once a
submit names one).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING

from scratchpad.errors import InstallError, ScratchpadError
from scratchpad.runtime import autoinstall
from scratchpad.runtime.accepts import check_repeat, load_recovered
from scratchpad.runtime.base import check_execute_args
from scratchpad.runtime.cell import Cell, ProgressEvent, StreamItem, new_cell_id
from scratchpad.runtime.cellqueue import CellQueue, Ticket
from scratchpad.runtime.cellrun import Caps, CellRun
from scratchpad.runtime.history import CellHistory, fold, unrecorded
from scratchpad.runtime.kernelslot import KernelSlot
from scratchpad.runtime.limits import LimitGuard
from scratchpad.runtime.rescrub import scrub_cell
from scratchpad.runtime.timeouts import Timeouts, compute_timeouts
from scratchpad.scrub import scrub, scrubber
from scratchpad.text import cut_middle

if TYPE_CHECKING:
    from scratchpad.runtime.local import LocalRuntime

OFF_LOOP_BYTES = 256 * 1024  # cells at least this big are written from a worker thread
Install = Callable[[list[str]], Awaitable[tuple[str, list[str]]]]


class CellFlow:
    """The cells of ``pad``: queued on ``queue``, run on ``slot``'s kernel, recorded in
    ``history``. ``install`` installs specs for a cell that holds the pad's turn (the report,
    and the specs installed); ``check_open`` raises when the pad is closed."""

    def __init__(
        self,
        pad: LocalRuntime,
        *,
        queue: CellQueue,
        slot: KernelSlot,
        guard: LimitGuard,
        history: CellHistory,
        install: Install,
        check_open: Callable[[], None],
    ) -> None:
        self._pad = pad
        self._queue = queue
        self._slot = slot
        self._guard = guard
        self._history = history
        self._install = install
        self._check_open = check_open
        self.run: CellRun | None = None  # the running cell's
        self._cells: list[Cell] = []
        self._loaded = False
        self.last_number: int | None = None  # the number given last (from the history at first)
        self._by_id: dict[str, Cell] | None = None  # recorded cells, once a submit names one
        self.background: set[asyncio.Task[Cell]] = set()
        self._rewriting = asyncio.Lock()  # a fold of the history, or a re-scrub

    # -- the recorded cells -----------------------------------------------------------------
    @property
    def cells(self) -> list[Cell]:
        """The recorded cells (read from disk on first use; :meth:`load_cells` does it off
        the event loop)."""
        if not self._loaded:
            self._set_loaded(load_recovered(self._history))
        return self._cells

    @cells.setter
    def cells(self, cells: list[Cell]) -> None:
        self._set_loaded(cells)

    def _set_loaded(self, cells: list[Cell]) -> None:
        self._cells = cells
        self._loaded = True
        self._by_id = None

    async def load_cells(self) -> list[Cell]:
        """The recorded cells, read from disk in a thread the first time."""
        if not self._loaded:
            self._set_loaded(await asyncio.to_thread(load_recovered, self._history))
        return self._cells

    def knows(self, cell_id: str) -> bool:
        return self._queue.get(cell_id) is not None or cell_id in self._recorded()

    def _recorded(self) -> dict[str, Cell]:
        """The recorded cells by id (built once a submit names one)."""
        if self._by_id is None:
            self._by_id = {cell.id: cell for cell in self.cells}
        return self._by_id

    # -- a cell -----------------------------------------------------------------------------
    async def execute_streaming(
        self,
        code: str,
        *,
        description: str = "",
        estimated_time: str = "",
        estimated_seconds: float = 0.0,
        timeout_s: float | None = None,
        cell_id: str | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        """See :meth:`ScratchpadRuntime.execute_streaming`."""
        pad = self._pad
        request = check_execute_args(
            code, description, estimated_seconds, estimated_time, cell_id, timeout_s
        )
        timeouts = compute_timeouts(request.estimated_seconds, pad.settings, request.timeout_s)
        self._check_open()
        await self._guard.before_cell()
        if request.cell_id is not None:
            known = await self._known(request.cell_id)
            if known is not None:
                check_repeat(request.cell_id, request.code, known_code=known.code, known_sha=None)
                yield known  # a repeated submit: the cell it names, not a second run
                return
        cell = Cell(
            code=request.code,
            description=request.description,
            estimated_time=request.estimated_time,
            id=request.cell_id or new_cell_id(),
            number=await self._next_number(),
        )
        ticket = self._queue.submit(cell)
        pad.watch.queued(cell)
        try:
            if not await self._queue.wait_turn(ticket):
                yield await self._skipped(ticket)
                return
        except BaseException:
            self._queue.done(ticket)
            pad.watch.gone(ticket.cell)
            raise
        run: CellRun | None = None
        try:
            try:
                run = await self._begin(ticket, timeouts)
            except BaseException as exc:
                ticket.cell.status = "killed"
                ticket.cell.error = f"The cell could not start: {exc}\n"
                pad.watch.recorded(ticket.cell)
                raise
            if run.finished:  # cancelled while its kernel started
                await self._persist(run.cell)
                yield run.cell
            retried = False
            while not run.finished:
                items = pad.watch.seen(await run.step())
                if run.finished and not retried and (package := self._to_install(run)):
                    retried = True
                    for item in items:
                        if not isinstance(item, Cell):
                            yield item
                    yield pad.watch.seen([ProgressEvent(f"installing {package}…")])[0]
                    run = await self._install_and_rerun(ticket, timeouts, run, package)
                    items = [run.cell] if run.finished else []  # failed, or cancelled
                for item in items:
                    if isinstance(item, Cell):
                        await self._persist(item)  # on disk before anyone hears of it
                    yield item
        finally:
            if run is not None and not run.finished:
                self._finish_in_background(run, ticket)  # keeps the lock until the cell ends
            else:
                self._release(ticket)

    async def _next_number(self) -> int:
        """The number of a cell being queued: one more than the last one given or recorded
        (so numbers go on across kernel and server restarts)."""
        last = self.last_number
        if last is None:
            recorded = max((cell.number for cell in await self.load_cells()), default=0)
            last = recorded if self.last_number is None else self.last_number  # set meanwhile?
        self.last_number = last + 1
        return last + 1

    async def _known(self, cell_id: str) -> Cell | None:
        """The cell that ``cell_id`` names: once it ended when queued or running, else from
        the history."""
        ticket = self._queue.get(cell_id)
        if ticket is not None:
            return await asyncio.shield(ticket.finished)
        await self.load_cells()
        return self._recorded().get(cell_id)

    async def _skipped(self, ticket: Ticket) -> Cell:
        cell = ticket.cell
        cell.status = "cancelled"
        cell.error = ticket.reason + "\n"
        self._remember(cell)
        await self._persist(cell)
        self._queue.done(ticket)
        return cell

    def _release(self, ticket: Ticket) -> None:
        self.run = None
        self._queue.release(ticket)

    async def _begin(self, ticket: Ticket, timeouts: Timeouts) -> CellRun:
        settings = self._pad.settings
        self._check_open()
        await self._slot.ensure()
        await self._slot.before_cell()
        self._check_open()  # closed while the kernel was starting
        kernel = self._slot.kernel
        assert kernel is not None
        run = CellRun(
            kernel,
            ticket.cell,
            timeouts=timeouts,
            grace=settings.interrupt_grace_s,
            caps=Caps(
                output_bytes=settings.output_cap_bytes,
                logs_chars=settings.logs_cap_chars,
                display_bytes=settings.display_cap_bytes,
            ),
            notes=self._slot.take_notes(kernel),
            on_killed=self._slot.after_kill,
            on_finished=self._record,
            restores=bool(settings.checkpoint_pad_mb),
        )
        self.run = run
        if ticket.cancelled.is_set():  # cancelled while its kernel started
            run.skip(ticket.reason)
        else:
            run.begin()  # a dead kernel shows up as an "exit" event on the first step
            self._pad.watch.started(ticket.cell)
        return run

    def _to_install(self, run: CellRun) -> str | None:
        """The package to install for a cell that failed on a missing module (opt-in)."""
        if not self._pad.settings.auto_install:
            return None
        module = autoinstall.missing_module(run.cell)
        return None if module is None else autoinstall.package_for(module)

    async def _install_and_rerun(
        self, ticket: Ticket, timeouts: Timeouts, run: CellRun, package: str
    ) -> CellRun:
        """Install ``package`` (the cell holds the pad's turn), then run the cell again as the
        same cell; when the install fails, the failed run stands, its logs saying why."""
        module = autoinstall.missing_module(run.cell)
        try:
            report, installed = await self._install([package])
        except (ScratchpadError, OSError) as exc:
            output = exc.output if isinstance(exc, InstallError) and exc.output else str(exc)
            why = f"Installing {package} for {module!r} failed: {cut_middle(output, 2000)}"
            run.cell.logs = scrub(f"{run.cell.logs}\n{why}" if run.cell.logs else why)
            return run
        if not installed:  # the package is there without the module: a rerun fails alike
            why = f"{package} (for {module!r}) is installed already; it has no such module."
            run.cell.logs = f"{run.cell.logs}\n{why}" if run.cell.logs else why
            return run
        self._forget(run.cell)  # the first run is not the cell's record: the second is
        autoinstall.start_over(run.cell)
        self._slot.notes.append(
            f"No module named {module!r}: installed {package} (SCRATCHPAD_AUTO_INSTALL) "
            f"and ran the cell again.\n{cut_middle(report.strip(), 2000)}".strip()
        )
        try:
            return await self._begin(ticket, timeouts)
        except BaseException as exc:
            run.cell.status = "killed"
            run.cell.error = f"The cell could not start again after the install: {exc}\n"
            self._pad.watch.recorded(run.cell)
            raise

    def _forget(self, cell: Cell) -> None:
        """Undo the record of ``cell`` in memory (it is about to run again)."""
        if self._cells and self._cells[-1] is cell:
            self._cells.pop()
        if self._by_id is not None and self._by_id.get(cell.id) is cell:
            del self._by_id[cell.id]

    def _finish_in_background(self, run: CellRun, ticket: Ticket) -> None:
        async def finish() -> Cell:
            try:
                while not run.finished:
                    self._pad.watch.seen(await run.step())
                await self._persist(run.cell)
                return run.cell
            finally:
                self._release(ticket)

        task = asyncio.get_running_loop().create_task(finish())
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def _record(self, run: CellRun) -> None:
        self._guard.after_cell()
        self._remember(run.cell)
        self._slot.after_cell(run)

    def _remember(self, cell: Cell) -> None:
        self.cells.append(cell)
        if self._by_id is not None:
            self._by_id[cell.id] = cell

    async def _persist(self, cell: Cell) -> None:
        """Write a finished cell before anyone hears of it (one that could not be written is
        answered saying so); a big one (or a fold of the history) off the event loop, so
        other pads never wait for it."""
        try:
            if cell.rough_size() < OFF_LOOP_BYTES:
                over = self._history.append(cell)
            else:
                over = await asyncio.to_thread(self._history.append, cell)
        except OSError as exc:  # the answer says so: never "ok" for a cell not stored
            unrecorded(cell, exc)
            over = False
        if over:
            async with self._rewriting:
                cells = list(self.cells)
                limit = self._pad.settings.history_max_bytes // 2
                folded = await asyncio.to_thread(fold, cells, limit)
                self.cells = folded + self.cells[len(cells) :]  # with any recorded meanwhile
                await asyncio.to_thread(self._history.rewrite, self.cells)
        self._pad.watch.recorded(cell)

    async def rescrub(self, change: Callable[[Cell], bool] | None = None) -> tuple[int, bool]:
        """See :meth:`ScratchpadRuntime.rescrub`; ``change`` (default: scrub with this
        process's scrubber) is applied to each cell in memory and in the history file."""
        change = change or partial(scrub_cell, scrubber())
        async with self._rewriting:  # not while a fold writes cells from before
            cells = self._cells if self._loaded else []
            changed = sum(change(cell) for cell in list(cells))
            try:
                return changed, await asyncio.to_thread(self._history.rescrub, change)
            except FileNotFoundError:
                return changed, False
