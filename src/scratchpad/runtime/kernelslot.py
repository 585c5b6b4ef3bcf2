"""One kernel at a time for a pad: started when a cell or an install needs one (its virtualenv
rebuilt first when unusable, or after the kernel died too many times in a row), stopped on
reset, close and after a kill, and asked things between cells; the notes its next cell is told
(a restart, output that arrived between cells); its generation (one more at every start,
kept in the pad's ``state.json`` with padstate.py); its sleep (the kernel stopped, the pad
marked asleep) and its wake (the next start).

The caller holds the pad's turn (its queue's lock) around every call that starts, stops or
asks the kernel.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from scratchpad.errors import InstallError, KernelStartError, PadError, ScratchpadError
from scratchpad.fsutil import disk_full_in
from scratchpad.runtime import checkpoint, venv
from scratchpad.runtime.blobscan import BlobScans
from scratchpad.runtime.cell import CappedOutput
from scratchpad.runtime.cellrun import CellRun
from scratchpad.runtime.history import CellHistory
from scratchpad.runtime.kernel import KernelProcess
from scratchpad.runtime.launcher import Launcher
from scratchpad.runtime.limits import LimitGuard
from scratchpad.runtime.padstate import PadState, read_state, write_state
from scratchpad.scrub import scrubber

if TYPE_CHECKING:
    from scratchpad.runtime.local import LocalRuntime

log = logging.getLogger(__name__)
DEATHS_BEFORE_FULL_RESET = 2
REQUEST_TIMEOUT_S = 30.0
LATE_OUTPUT_CAP = 64 * 1024  # bytes of between-cells output kept per stream


class KernelSlot:
    """The kernel of ``pad`` (None when none runs), started through ``launcher``, held to
    its limits by ``guard``; ``history`` is closed while the venv is rebuilt (its file moves)."""

    def __init__(
        self, pad: LocalRuntime, *, launcher: Launcher, guard: LimitGuard, history: CellHistory
    ) -> None:
        self._pad = pad
        self._launcher = launcher
        self._guard = guard
        self._history = history
        self.kernel: KernelProcess | None = None
        self.notes: list[str] = []  # told to the next cell (state lost, late output, ...)
        self._late: dict[str, CappedOutput] = {}  # output that arrived between cells
        self.deaths_in_a_row = 0
        self._death_reported = False  # the last death was already told in its cell
        self._state: PadState | None = None  # state.json, read when first needed
        self.started_at: float | None = None  # when the latest kernel started (epoch s)
        self.scans = BlobScans(pad.root, lambda line: self.notes.append(line))  # (secrets)

    @property
    def state(self) -> PadState:
        """The pad's state (read from ``state.json`` the first time: blocking I/O)."""
        if self._state is None:
            self._state = read_state(self._pad.root)
        return self._state

    @property
    def generation(self) -> int:
        """The generation of the latest kernel (0 when none ever started)."""
        return self.state.generation

    @property
    def asleep(self) -> bool:
        return self._state is not None and self._state.asleep_since is not None

    def clear(self) -> None:
        """Forget the past kernels (a reset): their notes, late output and deaths."""
        self.notes.clear()
        self._late = {}
        self.deaths_in_a_row = 0

    async def ensure(self, how: str | None = None) -> None:
        """A running kernel: this one, or a new one when it died or none runs, which restores
        the pad's variables from its checkpoint; the next cell is told how that went
        (``how``: why the last kernel is gone)."""
        kernel = self.kernel
        if kernel is not None and not kernel.channel_closed and kernel.alive:
            return
        if kernel is not None:
            for kind, payload in kernel.pending_events():  # its last words, and its exit
                self.note_late(kind, payload)
            code = await self.stop()
            how = "died" if self._death_reported else kernel.describe_exit(code)
        rebuild = None
        if self.deaths_in_a_row >= DEATHS_BEFORE_FULL_RESET:
            rebuild = f"the kernel died {self.deaths_in_a_row} times in a row"
            self.deaths_in_a_row = 0
        if how is None and self._state is None:  # a runtime new to this pad: ask its file
            self._state = await asyncio.to_thread(read_state, self._pad.root)
        if how is None and self.asleep:
            how = "was asleep"
        await self._start(rebuild)
        assert self.kernel is not None
        note = await checkpoint.resume(
            self.kernel, self._pad.root, self._pad.settings, how,
            suspect=rebuild is not None, stop=self.stop, start=self._start, on_other=self.note_late,
        )  # fmt: skip
        if note:
            self.notes.append(note)

    async def _start(self, rebuild: str | None = None) -> None:
        """Start a kernel, rebuilding the venv first when asked, when unusable, or on retry.
        A full disk fails it with DiskFullError naming the home, leaving nothing half-made."""
        pad = self._pad
        settings = pad.settings
        attempts = settings.venv_create_attempts
        last_error = ""
        self._death_reported = False
        await asyncio.to_thread(pad.ensure_cwd)  # the kernel starts in it
        if self._state is None:
            self._state = await asyncio.to_thread(read_state, pad.root)
        for attempt in range(attempts):
            if rebuild or attempt or not venv.is_reusable(pad.root):
                with disk_full_in(settings.home):
                    await self._rebuild_venv(rebuild or last_error or "no usable virtualenv yet")
                rebuild = None
            try:
                self.kernel = await self._launcher.spawn(self.generation + 1)
            except KernelStartError as exc:
                last_error = str(exc)
                continue
            if not venv.is_reusable(pad.root):
                try:
                    with disk_full_in(settings.home):
                        venv.mark_verified(pad.root)
                except OSError:
                    await self.stop()  # no kernel outlives a start that failed
                    raise
            await self._started()
            await self._guard.watch(self.kernel)
            self.kernel.on_exit = lambda kernel: pad.watch.died(pad, kernel)
            pad.watch.status(pad)
            return
        raise KernelStartError(
            f"pad {pad.name!r}: no kernel after {attempts} attempts ({last_error}). Check that "
            f"{sys.executable} runs, that {pad.root} is writable, or remove the pad and retry."
        )

    async def _started(self) -> None:
        """A kernel started: its generation is one more than the last one's (written to
        ``state.json`` off the event loop; a file that cannot be written is logged, the count
        goes on in memory); a pad that was asleep is awake, its next cell told so."""
        pad = self._pad
        self.started_at = time.time()
        state = self._state
        if state is None:
            state = await asyncio.to_thread(read_state, pad.root)
        woke = state.asleep_since is not None
        state = self._state = replace(state, generation=state.generation + 1, asleep_since=None)
        try:
            await asyncio.to_thread(write_state, pad.root, state)
        except OSError as exc:
            log.warning("pad %r: could not write its state (generation %d): %s",
                        pad.name, state.generation, exc)  # fmt: skip
        if woke and pad.on_wake is not None:
            pad.on_wake(pad)

    async def sleep(self, now: float, last_activity: float | None) -> None:
        """Put the pad to sleep (the caller holds its turn; no cell runs or waits): the
        kernel's state saved (:meth:`checkpoint_all`), the kernel stopped, the pad marked
        asleep since ``now`` in ``state.json``; its next start wakes it."""
        pad = self._pad
        await self.checkpoint_all("before sleep")
        await self.stop()
        state = self._state
        if state is None:
            state = await asyncio.to_thread(read_state, pad.root)
        state = self._state = replace(state, asleep_since=now, last_activity=last_activity)
        try:
            await asyncio.to_thread(write_state, pad.root, state)
        except OSError as exc:
            log.warning("pad %r: could not write its state (asleep): %s", pad.name, exc)

    async def checkpoint_all(self, why: str, timeout: float = REQUEST_TIMEOUT_S) -> None:
        """Before the kernel stops (sleep, close, a graceful server stop): every variable
        checked again (a full sweep) and on disk, so the next start brings back what the
        kernel holds now, even a value changed in place since its last cell. Given up after
        ``timeout``; a sweep that fails is logged (the checkpoint of the last cell stays)."""
        kernel = self.kernel
        if kernel is not None and kernel.alive and self._pad.settings.checkpoint_pad_mb:
            outcome = await checkpoint.checkpoint_all(kernel, timeout, self.note_late)
            if outcome.get("error"):
                log.warning("pad %r: checkpoint %s: %s", self._pad.name, why, outcome["error"])
            self.scans.start(outcome)
        elif kernel is not None and not kernel.alive:
            self.scans.kernel_stopped()  # no more writes: its scans need not wait for them
        await self.scans.settle()  # what is kept or copied holds no secret

    async def flush_checkpoints(self) -> None:
        """Until the running kernel's checkpoints are on disk (none runs: nothing to wait
        for); PadError when the kernel does not say so."""
        kernel = self.kernel
        if kernel is not None and kernel.alive and self._pad.settings.checkpoint_pad_mb:
            trouble = await checkpoint.flush(kernel, REQUEST_TIMEOUT_S, self.note_late)
            if trouble:
                raise PadError(f"pad {self._pad.name!r}: {trouble} while saving its variables")
        elif kernel is not None and not kernel.alive:
            self.scans.kernel_stopped()
        await self.scans.settle()  # and checked for secrets

    async def _rebuild_venv(self, why: str) -> None:
        pad = self._pad
        self._history.close()  # the file is moved into the new venv; reopen it there
        existed = pad.root.exists()
        await venv.create(pad.root, pad.name)
        if existed:
            self.notes.append(f"The pad's virtualenv was rebuilt ({why}).")
        try:
            if await self._launcher.install(None):
                self.notes.append("Packages from requirements.txt were reinstalled.")
        except InstallError as exc:
            self.notes.append(f"Reinstalling recorded packages failed: {exc}")

    async def stop(self) -> int | None:
        """Stop the kernel (shielded: a cancelled caller must not leave it half-stopped)."""
        kernel, self.kernel = self.kernel, None
        if kernel is None:
            return None
        self._guard.forget()
        code = await asyncio.shield(kernel.stop(grace=self._pad.settings.interrupt_grace_s))
        self.scans.kernel_stopped()  # what it wrote is on disk: the scans finish now
        await asyncio.to_thread(checkpoint.drop_partial, self._pad.root)
        await self._launcher.stopped()
        return code

    async def after_kill(self, run: CellRun) -> None:
        """The ladder killed the kernel: start a fresh one so the pad stays usable."""
        await self.stop()
        try:
            await self.ensure(how="was killed with the previous cell")
        except (ScratchpadError, OSError) as exc:
            self.notes.append(f"Restarting the kernel failed: {exc}")

    def after_cell(self, run: CellRun) -> None:
        """Scan the blobs its checkpoint wrote; count the deaths in a row (a cell that ended
        on its own breaks the run)."""
        self.scans.start(run.ckpt)
        if run.died:
            self.deaths_in_a_row += 1
            self._death_reported = True
        elif run.cell.status != "killed":
            self.deaths_in_a_row = 0

    async def request(self, message: dict[str, object], reply: str) -> dict[str, object]:
        """Ask the idle kernel something and wait for the answer of type ``reply``."""
        name = self._pad.name
        kernel = self.kernel
        assert kernel is not None
        if not kernel.request(message):
            raise PadError(f"pad {name!r}: the kernel is gone; run a cell to restart it")
        deadline = asyncio.get_running_loop().time() + REQUEST_TIMEOUT_S
        while True:
            event = await kernel.next_event(deadline)
            if event is None:
                raise PadError(f"pad {name!r}: the kernel did not answer {reply!r}")
            kind, payload = event
            if kind == "msg" and payload.get("type") == reply:
                return dict(payload)
            if kind == "exit":
                self.deaths_in_a_row += 1
                raise PadError(f"pad {name!r}: the kernel died; run a cell to restart it")
            self.note_late(kind, payload)

    async def before_cell(self) -> None:
        """Give the scans of the last cell's blobs a moment to finish, so its next cell
        hears what was not kept (a long scan is told to a later cell)."""
        await self.scans.before_cell()

    def take_notes(self, kernel: KernelProcess) -> list[str]:
        """Notes for the starting cell: restarts, and output that arrived between cells."""
        for kind, payload in kernel.pending_events():
            self.note_late(kind, payload)
        for kind, buffer in self._late.items():
            late = buffer.text(trim=scrubber().trim_cut).rstrip()  # scrubbed with the logs
            self.notes.append(f"[late {kind} from an earlier cell] {late}")
        self._late = {}
        notes, self.notes = self.notes, []
        return notes

    def note_late(self, kind: str, payload: object) -> None:
        if kind in ("stdout", "stderr") and isinstance(payload, bytes):
            self._late.setdefault(kind, CappedOutput(LATE_OUTPUT_CAP)).append(payload)
        elif kind == "exit":
            self.deaths_in_a_row += 1
