"""LocalRuntime: a pad as a virtualenv on disk plus one kernel process on this machine.

Cells run one at a time, in the order they were submitted. Each has an id from the moment it
is queued: cancelling a queued cell removes it (it never runs), cancelling the running one
interrupts it. Reset, close and remove end the running cell at once (saying what became of
its variables: lost, or after a close restored from the checkpoint at the next start) and
cancel the queued ones.

A pad idle for ``SCRATCHPAD_SLEEP_AFTER_S`` is put to sleep by its manager
(:meth:`LocalRuntime.sleep_if_idle`): its kernel stops; its next use starts one again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.errors import (
    InstallError,
    InvalidInputError,
    PadBusyError,
    PadClosedError,
    PadError,
)
from scratchpad.fsutil import disk_full_in
from scratchpad.llm.adapters import key_variable, pad_llm_environment
from scratchpad.runtime import checkpoint, padfork, venv, workdir
from scratchpad.runtime.accepts import AcceptLog
from scratchpad.runtime.base import CLOSED, PadLLM, ScratchpadRuntime
from scratchpad.runtime.cell import Cell, StreamItem
from scratchpad.runtime.cellflow import CellFlow
from scratchpad.runtime.cellqueue import CellQueue
from scratchpad.runtime.history import CellHistory
from scratchpad.runtime.kernel import WORKER_PATH, KernelProcess
from scratchpad.runtime.kernelslot import KernelSlot
from scratchpad.runtime.launcher import Launcher, SecretEnv
from scratchpad.runtime.limits import LimitGuard, PadLimits, disk_meter
from scratchpad.runtime.padstate import reverted, set_reverted
from scratchpad.runtime.watch import PadWatch
from scratchpad.scrub import register

log = logging.getLogger(__name__)
ABORT_WAIT_S = 10.0  # how long reset/close wait for the running cell to end
SAVE_ON_CLOSE_S = 5.0  # the checkpoint sweep of close (the server's shutdown grace)


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
        self._queue = CellQueue()
        self._lock = self._queue.lock  # cells, reset, close and installs take turns on it
        self._closed = False
        self._destroyed = False
        self._guard = LimitGuard(
            name, PadLimits.from_settings(settings), disk_meter(settings, root, cwd),
            busy=lambda: self.busy,
        )  # fmt: skip
        self._launcher = Launcher(
            name, root=root, cwd=cwd, settings=settings, worker=worker, secret_env=secret_env,
            guarded=guarded, limits=lambda: self._guard.limits,
        )  # fmt: skip
        history = CellHistory(
            root / "history.jsonl", settings.history_max_bytes, disk=settings.home
        )
        self._history = history
        self.watch = PadWatch(name)  # its live feed (the manager's, shared by name)
        # Called when a kernel starts for this pad while it was asleep (the manager's: a pad
        # it let go of when it fell asleep is used again).
        self.on_wake: Callable[[ScratchpadRuntime], None] | None = None
        self._slot = KernelSlot(self, launcher=self._launcher, guard=self._guard, history=history)
        self._flow = CellFlow(
            self, queue=self._queue, slot=self._slot, guard=self._guard, history=history,
            install=self._install, check_open=self._check_open,
        )  # fmt: skip

    @property
    def cells(self) -> list[Cell]:
        """The recorded cells (read from disk on first use; :meth:`load_cells` does it off
        the event loop)."""
        return self._flow.cells

    @cells.setter
    def cells(self, cells: list[Cell]) -> None:
        self._flow.cells = cells

    async def load_cells(self) -> list[Cell]:
        """The recorded cells, read from disk in a thread the first time."""
        return await self._flow.load_cells()

    @property
    def busy(self) -> bool:
        return self._queue.current is not None

    @property
    def queued(self) -> int:
        return self._queue.waiting

    def knows(self, cell_id: str) -> bool:
        return self._flow.knows(cell_id)

    @property
    def closed(self) -> bool:
        return self._closed or self._destroyed

    @property
    def kernel(self) -> KernelProcess | None:
        return self._slot.kernel

    @property
    def limits(self) -> PadLimits:
        """What this pad may take of the machine (see limits.py)."""
        return self._guard.limits

    def set_limits(self, limits: PadLimits) -> None:
        """This pad's own limits, from its next kernel on (a running one keeps its own; the
        memory and disk limits hold at once, the watchdog reads them)."""
        self._guard.limits = limits

    @property
    def generation(self) -> int:
        """The generation of the pad's latest kernel: one more at every kernel start, kept
        across server restarts (0 for a pad whose kernel never started). Reads the pad's
        ``state.json`` the first time."""
        return self._slot.generation

    @property
    def asleep(self) -> bool:
        """Whether the pad was put to sleep (no kernel) and not used since."""
        return self._slot.asleep

    @property
    def pid(self) -> int | None:
        """The kernel's process id (None when no kernel runs)."""
        kernel = self._slot.kernel
        return kernel.pid if kernel is not None else None

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        if self._destroyed:
            raise PadClosedError(f"pad {self.name!r} was removed; create it again to use it")
        self._closed = False
        await self.load_cells()
        async with self._lock:
            await self._slot.ensure()

    async def reset(self) -> None:
        await self._end_cells("the pad was reset")
        async with self._lock:
            self._check_open()
            await self._slot.stop()
            self.cells = []
            self._history.clear()
            AcceptLog(self.root).clear()
            await asyncio.to_thread(checkpoint.delete, self.root)
            await asyncio.to_thread(set_reverted, self.root, [])  # the cells it named are gone
            self._flow.last_number = 0  # the history is gone: numbers start again at 1
            self._slot.clear()
            await self._slot.ensure()

    async def close(self, *, reason: str = CLOSED) -> None:
        """Stop the kernel; an idle one first saves every variable (a full checkpoint sweep,
        at most ``SAVE_ON_CLOSE_S``), so the next start brings back what it holds now."""
        await self._close(reason, save=True)

    async def _close(self, reason: str, *, save: bool) -> None:
        self._closed = True
        await self._end_cells(reason, restorable=save)
        async with self._lock:
            stopping = self._slot.kernel is not None
            if save:
                await self._slot.checkpoint_all("before close", SAVE_ON_CLOSE_S)
            await self._slot.stop()
            await self._slot.scans.settle()  # no blob holding a secret outlives the pad
            self._history.close()
        if stopping:
            self.watch.status(self)

    async def cleanup(self) -> None:
        await self._close("the pad was removed", save=False)  # its checkpoint goes too
        self._destroyed = True
        await self._remove_files()  # the workdir first: a removal stopped half-way leaves a pad
        self.watch.status(self, "removed")

    async def cancel(self, cell_id: str | None = None) -> bool:
        queue = self._queue
        ticket = queue.current if cell_id is None else queue.get(cell_id)
        if ticket is None:
            if cell_id is not None:  # it may still be on its way: it must not run then
                queue.forbid(cell_id)
            return False
        run = self._flow.run
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

    async def sleep_if_idle(self, now: float) -> bool:
        """Sleep when idle for ``SCRATCHPAD_SLEEP_AFTER_S`` at ``now`` (epoch seconds): the
        kernel stopped, the pad marked asleep, its watchers told. Never while its turn is
        taken (a cell runs, waits or finishes, an install runs: the lock is not waited for),
        while a client watches its feed or follows one of its cells' streams, or when it has
        no kernel. Whether it slept."""
        after = self.settings.sleep_after_s
        if not after or self.closed or self._slot.kernel is None or self._lock.locked():
            return False
        if self.busy or self.queued or self._flow.background or self.watch.watched:
            return False
        if self.watch.attached:  # a client follows one of its cells' streams
            return False
        used = [t for t in (self.watch.last_activity, self._slot.started_at) if t is not None]
        last = max(used, default=None)
        if last is not None and now - last < after:
            return False
        await self._lock.acquire()  # free (checked above): taken without waiting
        try:
            await self._slot.sleep(now, last)
            self._history.close()
        finally:
            self._lock.release()
        self.watch.status(self, "asleep")
        return True

    async def revert(self) -> int:
        """Put the namespace back as it was before the last cell that changed it: the
        checkpoint's ``HEAD`` moved one manifest back (only files move, the server unpickles
        nothing) and a new kernel restores from there; its first cell's logs say so. The
        cell stays in the history; its number goes to ``state.json``'s ``reverted``. Again,
        it goes one more step back while an earlier checkpoint is kept. The number of the
        cell whose variables are current now."""
        self._refuse_busy()
        async with self._lock:
            self._check_open()
            self._refuse_busy()
            if not self.settings.checkpoint_pad_mb:
                raise InvalidInputError(
                    f"nothing to revert: pad {self.name!r} keeps no checkpoints "
                    "(SCRATCHPAD_CHECKPOINT_PAD_MB=0); set it above 0 to be able to revert"
                )
            await self._slot.flush_checkpoints()  # the last cell's checkpoint is on disk
            undone, back = await asyncio.to_thread(checkpoint.step_back, self.root)
            await self._slot.stop()
            await asyncio.to_thread(lambda: set_reverted(self.root, [*reverted(self.root), undone]))
            how = f"was restarted to revert cell {undone}: namespace reverted to after cell {back}"
            await self._slot.ensure(how=how)  # its start tells the pad's watchers
        return back

    def _refuse_busy(self) -> None:
        if self.busy or self.queued or self._flow.background:
            raise PadBusyError(
                f"pad {self.name!r} is running or waiting to run a cell; revert once it is "
                "idle (wait for the cell, or cancel it)"
            )

    async def fork_into(self, target: ScratchpadRuntime) -> None:
        """Make ``target`` (a new local pad, not started) a copy of this one: a full
        checkpoint first when a kernel runs (in its turn: never during a cell), then the
        files copied (requirements, history, checkpoint: see padfork.py) and ``target``'s
        venv built from the requirements. Nothing of this pad changes; ``target`` is asleep
        (its first cell restores the variables). A failure leaves no ``target``."""
        if not isinstance(target, LocalRuntime):
            raise PadError(f"pad {self.name!r} is local: it can only be forked into a local pad")
        async with self._lock:
            await self._slot.checkpoint_all("before a fork")
            with disk_full_in(self.settings.home):
                await asyncio.to_thread(padfork.copy_files, self.root, target.root, target.name)
        try:
            await target._build_forked()
        except InstallError as exc:
            await target._remove_files()
            raise InstallError(
                f"pad {target.name!r} was not made: installing the packages of {self.name!r} "
                f"into it failed ({exc})",
                exit_code=exc.exit_code,
                output=exc.output,
            ) from None
        except BaseException:
            await target._remove_files()
            raise

    async def _remove_files(self) -> None:
        if self.own_cwd:
            await workdir.remove(self.cwd)
        await venv.remove(self.root)

    async def _build_forked(self) -> None:
        """A forked pad's venv, from the requirements copied into it (an InstallError says
        which failed)."""
        async with self._lock:
            await asyncio.to_thread(self.ensure_cwd)
            with disk_full_in(self.settings.home):
                await venv.create(self.root, self.name)
            await self._launcher.install(None)
            with disk_full_in(self.settings.home):
                await asyncio.to_thread(venv.mark_verified, self.root)

    async def configure_llm(self, llm: PadLLM) -> None:
        """Remember the pad's model settings; a running kernel gets them at once."""
        env = pad_llm_environment(llm)
        if not env:
            return
        register([(llm.api_key, key_variable(llm.provider))])
        self._launcher.llm_env.update(env)
        async with self._lock:
            kernel = self._slot.kernel
            if kernel is not None and kernel.alive:
                await self._slot.request({"type": "set_env", "env": env}, "ack")

    async def _end_cells(self, why: str, *, restorable: bool = False) -> None:
        """Cancel the queued cells and stop the running one (its state goes with the
        kernel; ``restorable``: what the checkpoint holds comes back at the next start);
        wait until it is recorded."""
        current = self._queue.current
        for ticket in self._queue.others():
            ticket.cancel(f"Cell cancelled before it started: {why}; nothing ran.")
        if current is None:
            return
        run = self._flow.run
        if run is not None and run.cell is current.cell:
            lost = "all variables were lost"
            if restorable and self.settings.checkpoint_pad_mb:
                lost = (
                    "what it changed was lost; the variables saved after the last finished "
                    "cell are restored when the pad starts again"
                )
            run.abort(f"Cell stopped: {why} while it ran; {lost}.")
        else:
            current.cancel(f"Cell cancelled before it started: {why}; nothing ran.")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(current.finished), ABORT_WAIT_S)

    # -- cells ------------------------------------------------------------------------------
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
        return self._flow.execute_streaming(
            code,
            description=description,
            estimated_time=estimated_time,
            estimated_seconds=estimated_seconds,
            timeout_s=timeout_s,
            cell_id=cell_id,
        )

    async def rescrub(self, change: Callable[[Cell], bool] | None = None) -> tuple[int, bool]:
        """See ScratchpadRuntime.rescrub; ``change`` (default: this process's scrubber) is
        what is done to each cell (the Ray backend's actor takes the server's scrubbed ones)."""
        return await self._flow.rescrub(change)

    # -- packages ---------------------------------------------------------------------------
    async def install_packages(self, packages: list[str]) -> str:
        specs = venv.validate_specs(packages)
        async with self._lock:
            self._check_open()
            await self._slot.ensure()
            return (await self._install(specs))[0]

    async def _install(self, specs: list[str]) -> tuple[str, list[str]]:
        """Install ``specs`` into the venv (the caller holds the pad's turn): the report, and
        the specs installed (those not there already)."""
        present = await self._slot.request(
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
            await self._slot.request({"type": "refresh_imports"}, "ack")
        return "\n".join(report), wanted

    # -- the kernel -------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed or self._destroyed:
            raise PadClosedError(
                f"pad {self.name!r} is closed; start it again (or get_or_create) to run cells"
            )

    def ensure_cwd(self) -> Path:
        """The kernel's working directory; the pad's own is made when missing (blocks)."""
        return workdir.ensure(self.cwd) if self.own_cwd else self.cwd

    async def update_secrets(self, env: dict[str, str]) -> dict[str, str | None]:
        """Rotation: make a running kernel's vault variables ``env`` without a restart (sent
        between cells with ``set_env``; None unsets a variable). The changes sent."""
        async with self._lock:
            kernel = self._slot.kernel
            if kernel is None or kernel.channel_closed or not kernel.alive:
                return {}  # the next kernel asks for them at its start
            changes = self._launcher.secret_changes(env)
            if changes:
                await self._slot.request({"type": "set_env", "env": changes}, "ack")
                self._launcher.secrets_given = dict(env)
            return changes
