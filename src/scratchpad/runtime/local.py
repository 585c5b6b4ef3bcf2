"""LocalRuntime: a pad as a virtualenv on disk plus one kernel process on this machine.

Cells run one at a time, in the order they were submitted. Each has an id from the moment it
is queued: cancelling a queued cell removes it (it never runs), cancelling the running one
interrupts it. Reset, close and remove end the running cell at once (saying its variables
were lost) and cancel the queued ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncGenerator
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.errors import (
    InstallError,
    InvalidInputError,
    KernelStartError,
    PadClosedError,
    PadError,
    ScratchpadError,
)
from scratchpad.fsutil import disk_full_in
from scratchpad.llm.adapters import key_variable, pad_llm_environment
from scratchpad.runtime import autoinstall, checkpoint, venv, workdir
from scratchpad.runtime.base import CLOSED, PadLLM, ScratchpadRuntime, check_execute_args
from scratchpad.runtime.cell import CappedOutput, Cell, ProgressEvent, StreamItem, new_cell_id
from scratchpad.runtime.cellqueue import CellQueue, Ticket
from scratchpad.runtime.cellrun import Caps, CellRun
from scratchpad.runtime.history import CellHistory, fold, unrecorded
from scratchpad.runtime.kernel import WORKER_PATH, KernelProcess
from scratchpad.runtime.launcher import Launcher, SecretEnv
from scratchpad.runtime.limits import LimitGuard, PadLimits, disk_meter
from scratchpad.runtime.rescrub import rescrub_history, scrub_cell
from scratchpad.runtime.timeouts import Timeouts, compute_timeouts
from scratchpad.runtime.watch import PadWatch
from scratchpad.scrub import register, scrub, scrubber
from scratchpad.text import cut_middle

log = logging.getLogger(__name__)
DEATHS_BEFORE_FULL_RESET = 2
REQUEST_TIMEOUT_S = 30.0
LATE_OUTPUT_CAP = 64 * 1024  # bytes of between-cells output kept per stream
ABORT_WAIT_S = 10.0  # how long reset/close wait for the running cell to end
OFF_LOOP_BYTES = 256 * 1024  # cells at least this big are written from a worker thread


class LocalRuntime(ScratchpadRuntime):
    """One pad: venv at ``root``, kernel started in ``cwd``; cells run one at a time.
    ``own_cwd``: ``cwd`` is the pad's own (workdir.py), made before each kernel start and
    removed with the pad."""

    def __init__(
        self,
        name: str,
        *,
        root: Path,
        cwd: Path,
        own_cwd: bool = False,
        settings: Settings,
        worker: Path = WORKER_PATH,
        secret_env: SecretEnv | None = None,
        guarded: tuple[Path, ...] = (),
    ) -> None:
        super().__init__(name, compact_keep=settings.compact_keep_cells)
        self.root = root
        self.cwd = cwd
        self.own_cwd = own_cwd
        self.settings = settings
        self._kernel: KernelProcess | None = None
        self._queue = CellQueue()
        self._lock = self._queue.lock  # cells, reset, close and installs take turns on it
        self._run: CellRun | None = None
        self._closed = False
        self._destroyed = False
        self._notes: list[str] = []  # told to the next cell (state lost, late output, ...)
        self._late: dict[str, CappedOutput] = {}  # output that arrived between cells
        self._deaths_in_a_row = 0
        self._death_reported = False  # the last death was already told in its cell
        self._guard = LimitGuard(
            name, PadLimits.from_settings(settings), disk_meter(settings, root, cwd),
            busy=lambda: self.busy,
        )  # fmt: skip
        self._launcher = Launcher(
            name, root=root, cwd=cwd, settings=settings, worker=worker, secret_env=secret_env,
            guarded=guarded, limits=lambda: self._guard.limits,
        )  # fmt: skip
        self._history = CellHistory(
            root / "history.jsonl", settings.history_max_bytes, disk=settings.home
        )
        self._loaded = False
        self._last_number: int | None = None  # the number given last (from the history at first)
        self._by_id: dict[str, Cell] | None = None  # recorded cells, once a submit names one
        self._background: set[asyncio.Task[Cell]] = set()
        self._rewriting = asyncio.Lock()  # a fold of the history, or a re-scrub
        self.watch = PadWatch(name)  # its live feed (the manager's, shared by name)

    @property
    def cells(self) -> list[Cell]:
        """The recorded cells (read from disk on first use; :meth:`load_cells` does it off
        the event loop)."""
        if not self._loaded:
            self._set_loaded(self._history.load())
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
            self._set_loaded(await asyncio.to_thread(self._history.load))
        return self._cells

    @property
    def busy(self) -> bool:
        return self._queue.current is not None

    @property
    def queued(self) -> int:
        return self._queue.waiting

    def knows(self, cell_id: str) -> bool:
        return self._queue.get(cell_id) is not None or cell_id in self._recorded()

    def _recorded(self) -> dict[str, Cell]:
        """The recorded cells by id (built once a submit names one)."""
        if self._by_id is None:
            self._by_id = {cell.id: cell for cell in self.cells}
        return self._by_id

    @property
    def closed(self) -> bool:
        return self._closed or self._destroyed

    @property
    def kernel(self) -> KernelProcess | None:
        return self._kernel

    @property
    def limits(self) -> PadLimits:
        """What this pad may take of the machine (see limits.py)."""
        return self._guard.limits

    def set_limits(self, limits: PadLimits) -> None:
        """This pad's own limits, from its next kernel on (a running one keeps its own; the
        memory and disk limits hold at once, the watchdog reads them)."""
        self._guard.limits = limits

    @property
    def pid(self) -> int | None:
        """The kernel's process id (None when no kernel runs)."""
        return self._kernel.pid if self._kernel is not None else None

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        if self._destroyed:
            raise PadClosedError(f"pad {self.name!r} was removed; create it again to use it")
        self._closed = False
        await self.load_cells()
        async with self._lock:
            await self._ensure_kernel()

    async def reset(self) -> None:
        await self._end_cells("the pad was reset")
        async with self._lock:
            self._check_open()
            await self._stop_kernel()
            self.cells = []
            self._history.clear()
            self._last_number = 0  # the history is gone: numbers start again at 1
            self._notes.clear()
            self._late = {}
            self._deaths_in_a_row = 0
            await asyncio.to_thread(checkpoint.delete, self.root)
            await self._ensure_kernel()

    async def close(self, *, reason: str = CLOSED) -> None:
        self._closed = True
        await self._end_cells(reason)
        async with self._lock:
            stopping = self._kernel is not None
            await self._stop_kernel()
            self._history.close()
        if stopping:
            self.watch.status(self)

    async def cleanup(self) -> None:
        await self.close(reason="the pad was removed")
        self._destroyed = True
        if self.own_cwd:  # first: a removal stopped half-way leaves a pad, not its files
            await workdir.remove(self.cwd)
        await venv.remove(self.root)
        self.watch.status(self, "removed")

    async def cancel(self, cell_id: str | None = None) -> bool:
        queue = self._queue
        ticket = queue.current if cell_id is None else queue.get(cell_id)
        if ticket is None:
            if cell_id is not None:  # it may still be on its way: it must not run then
                queue.forbid(cell_id)
            return False
        run = self._run
        if (
            ticket is queue.current
            and run is not None
            and run.cell is ticket.cell
            and not run.finished
        ):
            run.request_cancel()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.done_event.wait(), self.settings.interrupt_grace_s + 10)
        else:  # queued, waiting for its kernel, or for a package to run again: it never runs
            ticket.cancel()
        return True

    async def configure_llm(self, llm: PadLLM) -> None:
        """Remember the pad's model settings; a running kernel gets them at once."""
        env = pad_llm_environment(llm)
        if not env:
            return
        register([(llm.api_key, key_variable(llm.provider))])
        self._launcher.llm_env.update(env)
        async with self._lock:
            if self._kernel is not None and self._kernel.alive:
                await self._request({"type": "set_env", "env": env}, "ack")

    async def _end_cells(self, why: str) -> None:
        """Cancel the queued cells and stop the running one (its state goes with the
        kernel); wait until it is recorded."""
        current = self._queue.current
        for ticket in self._queue.others():
            ticket.cancel(f"Cell cancelled before it started: {why}; nothing ran.")
        if current is None:
            return
        run = self._run
        if run is not None and run.cell is current.cell:
            run.abort(f"Cell stopped: {why} while it ran; all variables were lost.")
        else:
            current.cancel(f"Cell cancelled before it started: {why}; nothing ran.")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(current.finished), ABORT_WAIT_S)

    # -- cells ------------------------------------------------------------------------------
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
        request = check_execute_args(
            code, description, estimated_seconds, estimated_time, cell_id, timeout_s
        )
        timeouts = compute_timeouts(request.estimated_seconds, self.settings, request.timeout_s)
        self._check_open()
        await self._guard.before_cell()
        if request.cell_id is not None:
            known = await self._known(request.cell_id)
            if known is not None:
                if known.code != request.code:
                    raise InvalidInputError(
                        f"cell id {request.cell_id!r} already names a cell with other code; "
                        "give this cell a new id"
                    )
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
        self.watch.queued(cell)
        try:
            if not await self._queue.wait_turn(ticket):
                yield await self._skipped(ticket)
                return
        except BaseException:
            self._queue.done(ticket)
            self.watch.gone(ticket.cell)
            raise
        run: CellRun | None = None
        try:
            try:
                run = await self._begin(ticket, timeouts)
            except BaseException as exc:
                ticket.cell.status = "killed"
                ticket.cell.error = f"The cell could not start: {exc}\n"
                self.watch.recorded(ticket.cell)
                raise
            if run.finished:  # cancelled while its kernel started
                await self._persist(run.cell)
                yield run.cell
            retried = False
            while not run.finished:
                items = self.watch.seen(await run.step())
                if run.finished and not retried and (package := self._to_install(run)):
                    retried = True
                    for item in items:
                        if not isinstance(item, Cell):
                            yield item
                    yield self.watch.seen([ProgressEvent(f"installing {package}…")])[0]
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
        last = self._last_number
        if last is None:
            recorded = max((cell.number for cell in await self.load_cells()), default=0)
            last = recorded if self._last_number is None else self._last_number  # set meanwhile?
        self._last_number = last + 1
        return last + 1

    async def _known(self, cell_id: str) -> Cell | None:
        """The cell with this id: awaited when queued or running, else from the history."""
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
        self._run = None
        self._queue.release(ticket)

    async def _begin(self, ticket: Ticket, timeouts: Timeouts) -> CellRun:
        self._check_open()
        await self._ensure_kernel()
        self._check_open()  # closed while the kernel was starting
        kernel = self._kernel
        assert kernel is not None
        run = CellRun(
            kernel,
            ticket.cell,
            timeouts=timeouts,
            grace=self.settings.interrupt_grace_s,
            caps=Caps(
                output_bytes=self.settings.output_cap_bytes,
                logs_chars=self.settings.logs_cap_chars,
                display_bytes=self.settings.display_cap_bytes,
            ),
            notes=self._take_notes(kernel),
            on_killed=self._after_kill,
            on_finished=self._record,
        )
        self._run = run
        if ticket.cancelled.is_set():  # cancelled while its kernel started
            run.skip(ticket.reason)
        else:
            run.begin()  # a dead kernel shows up as an "exit" event on the first step
            self.watch.started(ticket.cell)
        return run

    def _to_install(self, run: CellRun) -> str | None:
        """The package to install for a cell that failed on a missing module (opt-in)."""
        if not self.settings.auto_install:
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
        self._notes.append(
            f"No module named {module!r}: installed {package} (SCRATCHPAD_AUTO_INSTALL) "
            f"and ran the cell again.\n{cut_middle(report.strip(), 2000)}".strip()
        )
        try:
            return await self._begin(ticket, timeouts)
        except BaseException as exc:
            run.cell.status = "killed"
            run.cell.error = f"The cell could not start again after the install: {exc}\n"
            self.watch.recorded(run.cell)
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
                    self.watch.seen(await run.step())
                await self._persist(run.cell)
                return run.cell
            finally:
                self._release(ticket)

        task = asyncio.get_running_loop().create_task(finish())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _record(self, run: CellRun) -> None:
        self._guard.after_cell()
        self._remember(run.cell)
        if run.died:
            self._deaths_in_a_row += 1
            self._death_reported = True
        elif run.cell.status != "killed":
            self._deaths_in_a_row = 0

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
                folded = await asyncio.to_thread(fold, cells, self.settings.history_max_bytes // 2)
                self.cells = folded + self.cells[len(cells) :]  # with any recorded meanwhile
                await asyncio.to_thread(self._history.rewrite, self.cells)
        self.watch.recorded(cell)

    async def rescrub(self) -> tuple[int, bool]:
        scrub = scrubber()
        async with self._rewriting:  # not while a fold writes cells from before
            cells = self._cells if self._loaded else []
            changed = sum(scrub_cell(scrub, cell) for cell in list(cells))
            try:
                return changed, await asyncio.to_thread(rescrub_history, self._history, scrub)
            except FileNotFoundError:
                return changed, False

    async def _after_kill(self, run: CellRun) -> None:
        """The ladder killed the kernel: start a fresh one so the pad stays usable."""
        await self._stop_kernel()
        try:
            await self._ensure_kernel(how="was killed with the previous cell")
        except (ScratchpadError, OSError) as exc:
            self._notes.append(f"Restarting the kernel failed: {exc}")

    # -- packages ---------------------------------------------------------------------------
    async def install_packages(self, packages: list[str]) -> str:
        specs = venv.validate_specs(packages)
        async with self._lock:
            self._check_open()
            await self._ensure_kernel()
            return (await self._install(specs))[0]

    async def _install(self, specs: list[str]) -> tuple[str, list[str]]:
        """Install ``specs`` into the venv (the caller holds the pad's turn): the report, and
        the specs installed (those not there already)."""
        present = await self._request(
            {"type": "which_installed", "names": venv.plain_names(specs)}, "installed"
        )
        names = present.get("names")
        present_names = [str(n) for n in names] if isinstance(names, list) else []
        wanted = [spec for spec in specs if spec not in present_names]
        report = [f"Already installed: {', '.join(present_names)}"] if present_names else []
        if wanted:
            report.append(await self._launcher.install(wanted))
            with disk_full_in(self.settings.home):
                venv.record_requirements(self.root, wanted)
            await self._request({"type": "refresh_imports"}, "ack")
        return "\n".join(report), wanted

    async def _request(self, message: dict[str, object], reply: str) -> dict[str, object]:
        """Ask the idle kernel something and wait for the answer of type ``reply``."""
        kernel = self._kernel
        assert kernel is not None
        if not kernel.request(message):
            raise PadError(f"pad {self.name!r}: the kernel is gone; run a cell to restart it")
        deadline = asyncio.get_running_loop().time() + REQUEST_TIMEOUT_S
        while True:
            event = await kernel.next_event(deadline)
            if event is None:
                raise PadError(f"pad {self.name!r}: the kernel did not answer {reply!r}")
            kind, payload = event
            if kind == "msg" and payload.get("type") == reply:
                return dict(payload)
            if kind == "exit":
                self._deaths_in_a_row += 1
                raise PadError(f"pad {self.name!r}: the kernel died; run a cell to restart it")
            self._note_late(kind, payload)

    # -- kernel management ------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed or self._destroyed:
            raise PadClosedError(
                f"pad {self.name!r} is closed; start it again (or get_or_create) to run cells"
            )

    async def _ensure_kernel(self, how: str | None = None) -> None:
        """A live kernel; a new one restores the pad's variables (``how``: why the last one
        is gone, for the note the next cell gets)."""
        kernel = self._kernel
        if kernel is not None and not kernel.channel_closed and kernel.alive:
            return
        if kernel is not None:
            for kind, payload in kernel.pending_events():  # its last words, and its exit
                self._note_late(kind, payload)
            code = await self._stop_kernel()
            how = "died" if self._death_reported else kernel.describe_exit(code)
        rebuild = None
        if self._deaths_in_a_row >= DEATHS_BEFORE_FULL_RESET:
            rebuild = f"the kernel died {self._deaths_in_a_row} times in a row"
            self._deaths_in_a_row = 0
        await self._start_kernel(rebuild)
        assert self._kernel is not None
        note = await checkpoint.resume(
            self._kernel, self.root, self.settings, how, suspect=rebuild is not None,
            stop=self._stop_kernel, start=self._start_kernel, on_other=self._note_late,
        )  # fmt: skip
        if note:
            self._notes.append(note)

    async def _start_kernel(self, rebuild: str | None = None) -> None:
        """Start a kernel, rebuilding the venv first when asked, when unusable, or on retry.
        A full disk fails it with DiskFullError naming the home, leaving nothing half-made."""
        attempts = self.settings.venv_create_attempts
        last_error = ""
        self._death_reported = False
        await asyncio.to_thread(self.ensure_cwd)  # the kernel starts in it
        for attempt in range(attempts):
            if rebuild or attempt or not venv.is_reusable(self.root):
                with disk_full_in(self.settings.home):
                    await self._rebuild_venv(rebuild or last_error or "no usable virtualenv yet")
                rebuild = None
            try:
                self._kernel = await self._launcher.spawn()
            except KernelStartError as exc:
                last_error = str(exc)
                continue
            if not venv.is_reusable(self.root):
                try:
                    with disk_full_in(self.settings.home):
                        venv.mark_verified(self.root)
                except OSError:
                    await self._stop_kernel()  # no kernel outlives a start that failed
                    raise
            await self._guard.watch(self._kernel)
            self._kernel.on_exit = lambda kernel: self.watch.died(self, kernel)
            self.watch.status(self)
            return
        raise KernelStartError(
            f"pad {self.name!r}: no kernel after {attempts} attempts ({last_error}). Check that "
            f"{sys.executable} runs, that {self.root} is writable, or remove the pad and retry."
        )

    async def _rebuild_venv(self, why: str) -> None:
        self._history.close()  # the file is moved into the new venv; reopen it there
        existed = self.root.exists()
        await venv.create(self.root, self.name)
        if existed:
            self._notes.append(f"The pad's virtualenv was rebuilt ({why}).")
        try:
            if await self._launcher.install(None):
                self._notes.append("Packages from requirements.txt were reinstalled.")
        except InstallError as exc:
            self._notes.append(f"Reinstalling recorded packages failed: {exc}")

    async def _stop_kernel(self) -> int | None:
        """Stop the kernel (shielded: a cancelled caller must not leave it half-stopped)."""
        kernel, self._kernel = self._kernel, None
        if kernel is None:
            return None
        self._guard.forget()
        code = await asyncio.shield(kernel.stop(grace=self.settings.interrupt_grace_s))
        await self._launcher.stopped()
        return code

    def ensure_cwd(self) -> Path:
        """The kernel's working directory; the pad's own is made when missing (blocks)."""
        return workdir.ensure(self.cwd) if self.own_cwd else self.cwd

    async def update_secrets(self, env: dict[str, str]) -> dict[str, str | None]:
        """Rotation: make a running kernel's vault variables ``env`` without a restart (sent
        between cells with ``set_env``; None unsets a variable). The changes sent."""
        async with self._lock:
            kernel = self._kernel
            if kernel is None or kernel.channel_closed or not kernel.alive:
                return {}  # the next kernel asks for them at its start
            changes = self._launcher.secret_changes(env)
            if changes:
                await self._request({"type": "set_env", "env": changes}, "ack")
                self._launcher.secrets_given = dict(env)
            return changes

    def _take_notes(self, kernel: KernelProcess) -> list[str]:
        """Notes for the starting cell: restarts, and output that arrived between cells."""
        for kind, payload in kernel.pending_events():
            self._note_late(kind, payload)
        for kind, buffer in self._late.items():
            late = buffer.text(trim=scrubber().trim_cut).rstrip()  # scrubbed with the logs
            self._notes.append(f"[late {kind} from an earlier cell] {late}")
        self._late = {}
        notes, self._notes = self._notes, []
        return notes

    def _note_late(self, kind: str, payload: object) -> None:
        if kind in ("stdout", "stderr") and isinstance(payload, bytes):
            self._late.setdefault(kind, CappedOutput(LATE_OUTPUT_CAP)).append(payload)
        elif kind == "exit":
            self._deaths_in_a_row += 1
