"""LocalRuntime: a pad as a virtualenv on disk plus one kernel process on this machine."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from collections.abc import AsyncGenerator
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.errors import (
    InstallError,
    KernelStartError,
    PadClosedError,
    PadError,
    ScratchpadError,
)
from scratchpad.runtime import venv
from scratchpad.runtime.base import ScratchpadRuntime, check_execute_args
from scratchpad.runtime.cell import CappedOutput, Cell, StreamItem
from scratchpad.runtime.cellrun import CellRun
from scratchpad.runtime.history import CellHistory
from scratchpad.runtime.kernel import WORKER_PATH, KernelProcess, describe_exit
from scratchpad.runtime.timeouts import compute_timeouts

MPL_BACKEND = "module://_scratchpad_mpl_backend"
DEATHS_BEFORE_FULL_RESET = 2
REQUEST_TIMEOUT_S = 30.0
LATE_OUTPUT_CAP = 64 * 1024  # bytes of between-cells output kept per stream


class LocalRuntime(ScratchpadRuntime):
    """One pad: venv at ``root``, kernel started in ``cwd``; cells run one at a time."""

    def __init__(
        self,
        name: str,
        *,
        root: Path,
        cwd: Path,
        settings: Settings,
        worker: Path = WORKER_PATH,
    ) -> None:
        super().__init__(name, compact_keep=settings.compact_keep_cells)
        self.root = root
        self.worker = worker
        self.cwd = cwd
        self.settings = settings
        self._kernel: KernelProcess | None = None
        self._lock = asyncio.Lock()
        self._run: CellRun | None = None
        self._closed = False
        self._destroyed = False
        self._notes: list[str] = []  # told to the next cell (state lost, late output, ...)
        self._late: dict[str, CappedOutput] = {}  # output that arrived between cells
        self._deaths_in_a_row = 0
        self._death_reported = False  # the last death was already told in its cell
        self._preparing = False  # a cell holds the lock and waits for its kernel
        self._cancel_pending = False
        self._history = CellHistory(root / "history.jsonl")
        self._background: set[asyncio.Task[Cell]] = set()
        self.cells = self._history.load()

    @property
    def busy(self) -> bool:
        return self._run is not None or self._preparing

    @property
    def closed(self) -> bool:
        return self._closed or self._destroyed

    @property
    def pid(self) -> int | None:
        """The kernel's process id (None when no kernel runs)."""
        return self._kernel.pid if self._kernel is not None else None

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        if self._destroyed:
            raise PadClosedError(f"pad {self.name!r} was removed; create it again to use it")
        self._closed = False
        async with self._lock:
            await self._ensure_kernel()

    async def reset(self) -> None:
        await self.cancel()
        async with self._lock:
            self._check_open()
            await self._stop_kernel()
            self.cells = []
            self._history.clear()
            self._notes.clear()
            self._late = {}
            self._deaths_in_a_row = 0
            await self._ensure_kernel()

    async def close(self) -> None:
        self._closed = True
        await self.cancel()
        async with self._lock:
            await self._stop_kernel()
            self._history.close()

    async def cleanup(self) -> None:
        await self.close()
        self._destroyed = True
        await asyncio.to_thread(shutil.rmtree, self.root, True)

    async def cancel(self) -> None:
        if self._preparing:
            self._cancel_pending = True  # the cell is still waiting for its kernel
        run = self._run
        if run is None:
            return
        run.request_cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.done_event.wait(), self.settings.interrupt_grace_s + 10)

    # -- cells ------------------------------------------------------------------------------
    async def execute_streaming(
        self,
        code: str,
        *,
        description: str = "",
        estimated_time: str = "",
        estimated_seconds: float = 0.0,
    ) -> AsyncGenerator[StreamItem, None]:
        check_execute_args(code, description, estimated_seconds)
        if not estimated_time and estimated_seconds:
            estimated_time = f"{estimated_seconds:g}s"
        cell = Cell(code=code, description=description, estimated_time=estimated_time)
        await self._lock.acquire()
        run: CellRun | None = None
        try:
            self._check_open()
            run = await self._begin(cell, estimated_seconds)
            if run.finished:  # cancelled before it started
                yield run.cell
            while not run.finished:
                for item in await run.step():
                    yield item
        finally:
            if run is not None and not run.finished:
                self._finish_in_background(run)  # keeps the lock until the cell ends
            else:
                self._run = None
                self._lock.release()

    async def _begin(self, cell: Cell, estimated_seconds: float) -> CellRun:
        self._preparing, self._cancel_pending = True, False
        try:
            await self._ensure_kernel()
        finally:
            self._preparing = False
        self._check_open()  # closed while the kernel was starting
        kernel = self._kernel
        assert kernel is not None
        logs = self._take_notes(kernel)
        run = CellRun(
            kernel,
            cell,
            timeouts=compute_timeouts(estimated_seconds, self.settings),
            grace=self.settings.interrupt_grace_s,
            output_cap=self.settings.output_cap_bytes,
            logs=logs,
            on_killed=self._after_kill,
            on_finished=self._record,
        )
        self._run = run
        if self._cancel_pending:
            run.skip("Cell cancelled before it started; nothing ran.")
        else:
            run.begin()  # a dead kernel shows up as an "exit" event on the first step
        return run

    def _finish_in_background(self, run: CellRun) -> None:
        async def finish() -> Cell:
            try:
                return await run.run_to_end()
            finally:
                self._run = None
                self._lock.release()

        task = asyncio.get_running_loop().create_task(finish())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _record(self, run: CellRun) -> None:
        self.cells.append(run.cell)
        self._history.append(run.cell)
        if run.died:
            self._deaths_in_a_row += 1
            self._death_reported = True
        elif run.cell.status != "killed":
            self._deaths_in_a_row = 0

    async def _after_kill(self, run: CellRun) -> None:
        """The ladder killed the kernel: start a fresh one so the pad stays usable."""
        await self._stop_kernel()
        self._notes.append(
            "The previous cell was killed; this kernel started fresh "
            "(all variables from before were lost)."
        )
        try:
            await self._ensure_kernel()
        except (ScratchpadError, OSError) as exc:
            self._notes.append(f"Restarting the kernel failed: {exc}")

    # -- packages ---------------------------------------------------------------------------
    async def install_packages(self, packages: list[str]) -> str:
        specs = venv.validate_specs(packages)
        async with self._lock:
            self._check_open()
            await self._ensure_kernel()
            present = await self._request(
                {"type": "which_installed", "names": venv.plain_names(specs)}, "installed"
            )
            names = present.get("names")
            present_names = [str(n) for n in names] if isinstance(names, list) else []
            wanted = [spec for spec in specs if spec not in present_names]
            report = [f"Already installed: {', '.join(present_names)}"] if present_names else []
            if wanted:
                report.append(
                    await venv.install(self.root, wanted, self.settings.install_timeout_s)
                )
                venv.record_requirements(self.root, wanted)
                await self._request({"type": "refresh_imports"}, "ack")
            return "\n".join(report)

    async def _request(self, message: dict[str, object], reply: str) -> dict[str, object]:
        """Ask the idle kernel something and wait for the answer of type ``reply``."""
        kernel = self._kernel
        assert kernel is not None
        if not kernel.send(message):
            raise PadError(f"pad {self.name!r}: the kernel is gone; run a cell to restart it")
        deadline = asyncio.get_running_loop().time() + REQUEST_TIMEOUT_S
        while True:
            event = await kernel.next_event(deadline)
            if event is None:
                raise InstallError(f"pad {self.name!r}: the kernel did not answer {reply!r}")
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

    async def _ensure_kernel(self) -> None:
        kernel = self._kernel
        if kernel is not None and not kernel.channel_closed and kernel.alive:
            return
        if kernel is not None:
            for kind, payload in kernel.pending_events():  # its last words, and its exit
                self._note_late(kind, payload)
            code = await self._stop_kernel()
            how = "died" if self._death_reported else describe_exit(code, kernel.killed_by_us)
            self._notes.append(
                f"The kernel {how}; this is a fresh kernel (all variables from before were lost)."
            )
        rebuild = None
        if self._deaths_in_a_row >= DEATHS_BEFORE_FULL_RESET:
            rebuild = f"the kernel died {self._deaths_in_a_row} times in a row"
            self._deaths_in_a_row = 0
        await self._start_kernel(rebuild)

    async def _start_kernel(self, rebuild: str | None = None) -> None:
        """Start a kernel, rebuilding the venv first when asked, when unusable, or on retry."""
        attempts = self.settings.venv_create_attempts
        last_error = ""
        self._death_reported = False
        for attempt in range(attempts):
            if rebuild or attempt or not venv.is_reusable(self.root):
                await self._rebuild_venv(rebuild or last_error or "no usable virtualenv yet")
                rebuild = None
            try:
                self._kernel = await KernelProcess.spawn(
                    venv.venv_python(self.root),
                    cwd=self.cwd,
                    env=self._kernel_env(),
                    config={"memory_limit_mb": self.settings.kernel_memory_limit_mb},
                    timeout=self.settings.kernel_start_timeout_s,
                    worker=self.worker,
                )
            except KernelStartError as exc:
                last_error = str(exc)
                continue
            if not venv.is_reusable(self.root):
                venv.mark_verified(self.root)
            return
        raise KernelStartError(
            f"pad {self.name!r}: no kernel after {attempts} attempts ({last_error}). Check that "
            f"{sys.executable} runs, that {self.root} is writable, or remove the pad and retry."
        )

    async def _rebuild_venv(self, why: str) -> None:
        self._history.close()  # the file is moved into the new venv; reopen it there
        existed = self.root.exists()
        await venv.create(self.root)
        if existed:
            self._notes.append(f"The pad's virtualenv was rebuilt ({why}).")
        try:
            if await venv.restore(self.root, self.settings.install_timeout_s):
                self._notes.append("Packages from requirements.txt were reinstalled.")
        except InstallError as exc:
            self._notes.append(f"Reinstalling recorded packages failed: {exc}")

    async def _stop_kernel(self) -> int | None:
        """Stop the kernel (shielded: a cancelled caller must not leave it half-stopped)."""
        kernel, self._kernel = self._kernel, None
        if kernel is None:
            return None
        return await asyncio.shield(kernel.stop(grace=self.settings.interrupt_grace_s))

    def _kernel_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("PYTHONHOME", None)
        env["PYTHONUTF8"] = "1"
        env["VIRTUAL_ENV"] = str(self.root)
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env.setdefault("MPLBACKEND", MPL_BACKEND)
        return env

    def _take_notes(self, kernel: KernelProcess) -> list[str]:
        """Notes for the starting cell: restarts, and output that arrived between cells."""
        for kind, payload in kernel.pending_events():
            self._note_late(kind, payload)
        for kind, buffer in self._late.items():
            self._notes.append(f"[late {kind} from an earlier cell] {buffer.text().rstrip()}")
        self._late = {}
        notes, self._notes = self._notes, []
        return notes

    def _note_late(self, kind: str, payload: object) -> None:
        if kind in ("stdout", "stderr") and isinstance(payload, bytes):
            self._late.setdefault(kind, CappedOutput(LATE_OUTPUT_CAP)).append(payload)
        elif kind == "exit":
            self._deaths_in_a_row += 1
