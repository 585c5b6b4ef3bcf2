"""One cell running in a local kernel: events in, stream items out, timeouts and the kill ladder.

A ``CellRun`` keeps its whole state on the object, not in generator locals, so that when the
caller goes away mid-cell (a dropped HTTP client, a cancelled task) the runtime can finish the
same run in the background and the cell is still recorded.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Literal

from scratchpad.runtime.cell import (
    CappedOutput,
    Cell,
    DisplayEvent,
    OutputEvent,
    ProgressEvent,
    StreamItem,
)
from scratchpad.runtime.kernel import KernelProcess, describe_exit
from scratchpad.runtime.timeouts import Timeouts

StopReason = Literal["timeout", "inactivity", "cancelled"]


class CellRun:
    """Drives one cell to its end. Call :meth:`step` until :attr:`finished`."""

    def __init__(
        self,
        kernel: KernelProcess,
        cell: Cell,
        *,
        timeouts: Timeouts,
        grace: float,
        output_cap: int,
        logs: list[str],
        on_killed: Callable[[CellRun], Awaitable[None]],
        on_finished: Callable[[CellRun], None],
    ) -> None:
        self.kernel = kernel
        self.cell = cell
        self.timeouts = timeouts
        self.grace = grace
        self.logs = logs
        self.on_killed = on_killed
        self.on_finished = on_finished
        self.stdout = CappedOutput(output_cap)
        self.stderr = CappedOutput(output_cap)
        self.finished = False
        self.died = False  # the kernel died on its own (not killed by the ladder)
        self.done_event = asyncio.Event()
        self.stop_reason: StopReason | None = None
        self.cancel_requested = False
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._started = time.perf_counter()
        self._start = loop.time()
        self._last_activity = self._start
        self._interrupted_at: float | None = None
        self._ending: asyncio.Future[None] | None = None  # a kill or an exit under way

    def begin(self) -> bool:
        """Send the code to the kernel; False when the kernel is already gone."""
        return self.kernel.send({"type": "execute", "code": self.cell.code})

    def skip(self, reason: str) -> Cell:
        """End the cell without running it (it was cancelled while waiting for a kernel)."""
        self.cell.status = "cancelled"
        self.cell.error = reason + "\n"
        return self._finish()

    def request_cancel(self) -> None:
        self.cancel_requested = True
        self.kernel.wake()

    async def step(self) -> list[StreamItem]:
        """Wait for the next thing to happen; what to stream (the Cell comes last).

        Deadlines and cancel are checked before any queued event, so a cell that prints
        steadily to a slow listener still times out.
        """
        if self._ending is not None:  # resumed after the listener went away mid-ending
            return [await self._end(self._ending)]
        if self._due():
            return await self._on_deadline()
        event = await self.kernel.next_event(self._deadline())
        if event is None:
            return await self._on_deadline()
        kind, payload = event
        if kind == "msg":
            return await self._on_message(payload)
        if kind == "exit":
            return [await self._end(self._exited())]
        self._last_activity = self._loop.time()
        buffer = self.stdout if kind == "stdout" else self.stderr
        text = buffer.append(payload)
        return [OutputEvent(kind, text)] if text else []  # type: ignore[arg-type]

    async def run_to_end(self) -> Cell:
        """Finish without a listener (the caller went away)."""
        while not self.finished:
            await self.step()
        return self.cell

    # -- internals --------------------------------------------------------------------------
    def _due(self) -> bool:
        if self._interrupted_at is None and self.cancel_requested:
            return True
        if self.kernel.done_queued:
            return False  # the answer is in the queue: read up to it, whatever the clock says
        return self._loop.time() >= self._deadline()

    def _deadline(self) -> float:
        if self._interrupted_at is not None:
            return self._interrupted_at + self.grace
        return min(
            self._start + self.timeouts.total, self._last_activity + self.timeouts.inactivity
        )

    async def _on_message(self, message: dict[str, object]) -> list[StreamItem]:
        kind = message.get("type")
        if kind == "progress":
            self._last_activity = self._loop.time()
            text = str(message.get("message", ""))
            self.logs.append(text)
            return [ProgressEvent(text)]
        if kind == "display" and isinstance(message.get("data"), dict):
            self._last_activity = self._loop.time()
            data: dict[str, object] = message["data"]  # type: ignore[assignment]
            self.cell.outputs.append(data)
            return [DisplayEvent(data)]
        if kind == "done":
            return [self._finish_done(message)]
        return []

    async def _on_deadline(self) -> list[StreamItem]:
        if not self.kernel.alive:  # dead, though something still holds its channel open
            return [await self._end(self._exited())]
        now = self._loop.time()
        if self._interrupted_at is not None:
            if now >= self._interrupted_at + self.grace and not self.kernel.done_queued:
                return [await self._end(self._killed())]
            return []
        if self.cancel_requested:
            self._interrupt("cancelled", now)
        elif now >= self._start + self.timeouts.total:
            self._interrupt("timeout", now)
        elif now >= self._last_activity + self.timeouts.inactivity:
            self._interrupt("inactivity", now)
        return []

    def _interrupt(self, reason: StopReason, now: float) -> None:
        self.stop_reason = reason
        self._interrupted_at = now
        self.kernel.interrupt()

    def _stop_text(self, kept: bool) -> str:
        """The first line of a stopped cell's error; the prefixes are a contract."""
        reason = self.stop_reason
        if reason == "timeout":
            head = f"Cell timed out after {self.timeouts.total:g}s"
        elif reason == "inactivity":
            head = f"Cell killed after {self.timeouts.inactivity:g}s without output"
        else:
            head = "Cell cancelled"
        if kept:
            return f"{head} (interrupted; variables are kept)"
        return (
            f"{head}; the kernel did not stop when interrupted and was killed and "
            "restarted, so all variables were lost"
        )

    def _finish_done(self, message: dict[str, object]) -> Cell:
        status = message.get("status")
        cell = self.cell
        result = message.get("result")
        cell.result = result if isinstance(result, str) else None
        error = message.get("error")
        if status == "ok":
            cell.status = "ok"
        elif status == "interrupted":
            cell.status = "cancelled" if self.stop_reason in (None, "cancelled") else "timeout"
            if self.stop_reason is None:
                self.stop_reason = "cancelled"  # an outside SIGINT: the user stopped it
            cell.error = f"{self._stop_text(kept=True)}\n{error or ''}".rstrip() + "\n"
        else:
            cell.status = "error"
            cell.error = str(error or "unknown error")
        return self._finish()

    async def _end(self, ending: Awaitable[None]) -> Cell:
        """Run the ending (kill or exit) to completion even if the listener is cancelled."""
        if self._ending is None:
            self._ending = asyncio.ensure_future(ending)
        elif ending is not self._ending and asyncio.iscoroutine(ending):
            ending.close()  # a second ending while one runs: the first one wins
        try:
            await asyncio.shield(self._ending)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.logs.append(f"Cleaning up after the kernel failed: {exc!r}")
        return self._finish()

    async def _killed(self) -> None:
        self.kernel.signal_group(signal.SIGKILL)
        self.cell.status = "killed"
        self.cell.error = self._stop_text(kept=False) + "\n"
        await self.on_killed(self)

    async def _exited(self) -> None:
        code = await self.kernel.wait_exit(2.0)
        cause = self.kernel.protocol_error or describe_exit(code, self.kernel.killed_by_us)
        self.died = True
        self.cell.status = "killed"
        self.cell.error = (
            f"The pad's kernel {cause} while running this cell; all variables were lost. "
            "The next cell starts a fresh kernel.\n"
        )

    def _finish(self) -> Cell:
        cell = self.cell
        if self.finished:
            return cell
        cell.stdout = self.stdout.text()
        cell.stderr = self.stderr.text()
        for name, buffer in (("stdout", self.stdout), ("stderr", self.stderr)):
            if buffer.dropped:
                self.logs.append(
                    f"{name}: {buffer.total} bytes written, "
                    f"{buffer.dropped} dropped from the middle (cap per stream)"
                )
        cell.logs = "\n".join(self.logs)
        cell.duration_s = round(time.perf_counter() - self._started, 6)
        self.finished = True
        self.on_finished(self)
        self.done_event.set()
        return cell
