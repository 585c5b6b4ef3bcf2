"""One cell running in a local kernel: events in, stream items out, timeouts and the kill ladder.

A ``CellRun`` keeps its whole state on the object, not in generator locals, so that when the
caller goes away mid-cell (a dropped HTTP client, a cancelled task) the runtime can finish the
same run in the background and the cell is still recorded.

Liveness: output, progress, displays and the kernel's heartbeats are signs of life; only when
none came for the inactivity window is the cell stopped as hung. An interrupt (cancel,
timeout) waits for the kernel's ``started`` report, because before it SIGINT has nothing to
stop; the grace clock runs from the interrupt.

A frame that breaks the protocol while the cell runs (a cell wrote to the control channel: see
kernel.py) ends the cell the same way: interrupted, then ended as an error that says so once
the kernel answers the parent's sync (variables kept), or killed after the grace.

Secrets: everything a cell says passes the process's scrubber here, where it enters the core,
so streams, the stored history and every view of the cell carry no secret. Streamed output
goes through one stream scrubber per channel (a secret split across two reads is still
caught); what it holds back is streamed before the cell ends.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from scratchpad.runtime import checkpoint
from scratchpad.runtime.cell import (
    CappedItems,
    CappedOutput,
    Cell,
    DisplayEvent,
    OutputEvent,
    ProgressEvent,
    StreamItem,
    bundle_size,
    chars_after,
)
from scratchpad.runtime.kernel import PASSED, KernelProcess
from scratchpad.runtime.timeouts import Timeouts, advice
from scratchpad.scrub import scrub, scrub_bundle, scrubber
from scratchpad.text import clean_data, clean_text, cut_middle

StopReason = Literal["timeout", "inactivity", "cancelled", "aborted", "violation"]
MESSAGE_CAP = 4_000  # characters of one progress message or note
MAX_NESTING = 100  # levels a display's or result's data may nest (the cleaning recurses)
STREAM_INTERVAL_S = 1.0  # past the kept head, at most one progress/display frame per second
KERNEL_CUT = re.compile(r"\n\[\.\.\. \d+ characters omitted \.\.\.\]\n")  # worker.cut_text


Mark = tuple[int | None, int]
"""Where a stream stood when a display came: characters passed on so far (None once past
the kept head), and bytes written."""
Placed = tuple[dict[str, Any], Mark, Mark]  # a display, where stdout and stderr stood


@dataclass(frozen=True, slots=True)
class Caps:
    """How much of each channel one cell keeps (head + tail, a note for the rest)."""

    output_bytes: int
    logs_chars: int
    display_bytes: int


class CellRun:
    """Drives one cell to its end. Call :meth:`step` until :attr:`finished`."""

    def __init__(
        self,
        kernel: KernelProcess,
        cell: Cell,
        *,
        timeouts: Timeouts,
        grace: float,
        caps: Caps,
        notes: list[str],
        on_killed: Callable[[CellRun], Awaitable[None]],
        on_finished: Callable[[CellRun], None],
        restores: bool = False,
    ) -> None:
        self.kernel = kernel
        self.restores = restores  # the next kernel restores the checkpoint (what errors say)
        self.cell = cell
        self.timeouts = timeouts
        self.grace = grace
        self.on_killed = on_killed
        self.on_finished = on_finished
        self.channels: dict[Literal["stdout", "stderr"], Channel] = {
            "stdout": Channel(caps.output_bytes),
            "stderr": Channel(caps.output_bytes),
        }
        self.logs: CappedItems[str] = CappedItems(caps.logs_chars, len)
        self.displays: CappedItems[Placed] = CappedItems(caps.display_bytes, _placed_size)
        for note in notes:  # bounded where they are made (late output keeps 64 KiB)
            self.logs.append(note)
        self.finished = False
        self.died = False  # the kernel died on its own (not killed by the ladder)
        self.done_event = asyncio.Event()
        self.stop_reason: StopReason | None = None
        self.violation: str | None = None  # how the kernel broke the protocol in this cell
        self.ckpt: object = None  # the checkpoint outcome of its ``done`` frame (untrusted)
        self.cancel_requested = False
        self._abort_text: str | None = None
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._began = time.perf_counter()
        self._start = loop.time()
        self._last_streamed = 0.0
        self._interrupt_pending = False  # wanted, waiting for "started"
        self._interrupted_at: float | None = None
        self._ending: asyncio.Future[None] | None = None  # a kill or an exit under way

    @property
    def started(self) -> bool:
        """Whether the kernel reported that it entered this cell (SIGINT can land now)."""
        return self.kernel.started is not None

    def begin(self) -> bool:
        """Send the code to the kernel; False when the kernel is already gone."""
        self.kernel.on_started = self._on_started
        return self.kernel.execute(self.cell.id, self.cell.code, self.cell.number)

    def _on_started(self) -> None:
        if self._interrupt_pending:
            self._send_interrupt(self._loop.time())

    def skip(self, reason: str) -> Cell:
        """End the cell without running it (cancelled while it waited for its turn)."""
        self.cell.status = "cancelled"
        self.cell.error = reason + "\n"
        return self._finish()

    def request_cancel(self) -> None:
        self.cancel_requested = True
        self.kernel.wake()

    def abort(self, reason: str) -> None:
        """Stop at once with the kernel (its state is about to go anyway: reset, close)."""
        self._abort_text = reason
        self.kernel.wake()

    async def step(self) -> list[StreamItem]:
        """Wait for the next thing to happen; what to stream (the Cell comes last).

        Deadlines and cancel are checked before any queued event, so a cell that prints
        steadily to a slow listener still times out.
        """
        items = await self._next_items()
        if self.finished:  # what the stream scrubbers held back goes out before the cell
            held = [OutputEvent(kind, channel.held) for kind, channel in self.channels.items()]
            items = [item for item in held if item.text] + items
        return items

    async def _next_items(self) -> list[StreamItem]:
        if self._ending is not None:  # resumed after the listener went away mid-ending
            return [await self._end(self._ending)]
        if self._abort_text is not None:
            return [await self._end(self._aborted())]
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
        if kind == "violation":
            return self._on_violation(payload)
        if kind == "synced":
            return self._on_synced(*payload)
        text = self.channels[kind].append(payload)  # type: ignore[index]
        return [OutputEvent(kind, text)] if text else []  # type: ignore[arg-type]

    async def run_to_end(self) -> Cell:
        """Finish without a listener (the caller went away)."""
        while not self.finished:
            await self.step()
        return self.cell

    # -- internals --------------------------------------------------------------------------
    def _due(self) -> bool:
        if self.cancel_requested and self.stop_reason is None:
            return True
        if self.kernel.ends_queued:
            return False  # the answer is in the queue: read up to it, whatever the clock says
        return self._loop.time() >= self._deadline()

    def _deadline(self) -> float:
        if self._interrupted_at is not None:
            return self._interrupted_at + self.grace
        return min(self._start + self.timeouts.total, self._last_alive() + self.timeouts.inactivity)

    def _last_alive(self) -> float:
        """When the kernel last showed a sign of life during this cell (output, a frame, a
        heartbeat), or when the cell began."""
        return max(self._start, self.kernel.last_alive)

    async def _on_message(self, message: dict[str, object]) -> list[StreamItem]:
        kind = message.get("type")
        now = self._loop.time()
        if kind == "progress":
            text = cut_middle(
                scrub_message(clean_text(str(message.get("message", "")))), MESSAGE_CAP
            )
            return [ProgressEvent(text)] if self._keep(self.logs.append(text), now) else []
        if kind == "log":  # a logging record: the cell's logs, not its progress
            self.logs.append(
                cut_middle(scrub_message(clean_text(str(message.get("message", "")))), MESSAGE_CAP)
            )
            return []
        if kind == "display" and isinstance(raw := message.get("data"), dict):
            if nests_deeper(raw, MAX_NESTING):
                data = {"text/plain": f"[a display was dropped: {TOO_DEEP}]"}
            else:
                data = fit_bundle(scrub_bundle(clean_data(raw)), self.displays.half)
            passed = message.get(PASSED)
            late = passed if isinstance(passed, dict) else {}
            out, err = (self.channels[s].mark(late.get(s, 0)) for s in ("stdout", "stderr"))
            placed = (data, out, err)
            return [DisplayEvent(data)] if self._keep(self.displays.append(placed), now) else []
        if kind == "result" and isinstance(rich := message.get("data"), dict):
            self._on_result(rich)
            return []
        if kind == "done":
            return [self._finish_done(message)]
        return []

    def _on_result(self, data: dict[str, Any]) -> None:
        """The rich forms of the cell's result, scrubbed and capped as a display is (one
        over the cap is left out, saying so in the logs; the result's text stays)."""
        if nests_deeper(data, MAX_NESTING):
            self.logs.append(f"result: its rich forms were left out: {TOO_DEEP}")
            self.cell.result_data = {}
            return
        bundle = scrub_bundle(clean_data(data))
        note = bundle.pop("text/plain", None)  # the kernel's note of a form it dropped
        size = bundle_size(bundle)
        if size > self.displays.half:
            kinds = ", ".join(sorted(bundle))
            note = f"the result's rich forms ({kinds}, {size} bytes) were left out: over the cap"
            bundle = {}
        if note:  # the kernel's words, or a cell's forgery: one note, capped as a message
            self.logs.append(cut_middle(f"result: {note}", MESSAGE_CAP))
        self.cell.result_data = bundle

    def _on_violation(self, why: str) -> list[StreamItem]:
        """The kernel broke the protocol while in this cell: stop the cell (nothing more it
        sends is taken; it ends when the kernel answers the sync, see :meth:`_on_synced`)."""
        if self.violation is None:
            self.violation = why
            if self._interrupted_at is None:
                self._want_interrupt("violation", self._loop.time())
        return []

    def _on_synced(self, cell_id: str, why: str) -> list[StreamItem]:
        """The kernel is past this cell, and its own end was not taken: end it as an error."""
        if cell_id != self.cell.id:
            return []
        self.cell.status = "error"
        if self.violation is not None:
            self.cell.error = f"{self._violation_words()} (interrupted; variables are kept).\n"
        else:
            self.cell.error = (
                f"The cell ran, but its answer was lost: {why[:1].lower()}{why[1:]} before it "
                "started (code of an earlier cell wrote to the kernel's control channel). "
                "Variables are kept.\n"
            )
        return [self._finish()]

    def _violation_words(self) -> str:
        return f"{self.violation}: a cell wrote to the kernel's control channel; the cell was ended"

    def _keep(self, in_head: bool, now: float) -> bool:
        """Whether to stream a progress/display event: always in the head, then rarely."""
        if in_head or now - self._last_streamed >= STREAM_INTERVAL_S:
            self._last_streamed = now
            return True
        return False

    async def _on_deadline(self) -> list[StreamItem]:
        if not self.kernel.alive:  # dead, though something still holds its channel open
            return [await self._end(self._exited())]
        now = self._loop.time()
        if self._interrupted_at is not None:
            if now >= self._interrupted_at + self.grace and not self.kernel.ends_queued:
                return [await self._end(self._killed())]
            return []
        silent = now >= self._last_alive() + self.timeouts.inactivity
        if self._interrupt_pending and (silent or now >= self._start + self.timeouts.total):
            return [await self._end(self._killed())]  # it never even entered the cell
        if self.cancel_requested:
            self._want_interrupt("cancelled", now)
        elif now >= self._start + self.timeouts.total:
            self._want_interrupt("timeout", now)
        elif silent:
            self._want_interrupt("inactivity", now)
        return []

    def _want_interrupt(self, reason: StopReason, now: float) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        if self.started:
            self._send_interrupt(now)
        else:
            self._interrupt_pending = True

    def _send_interrupt(self, now: float) -> None:
        self._interrupt_pending = False
        self._interrupted_at = now
        self.kernel.interrupt()

    def _stop_text(self, kept: bool) -> str:
        """The first line of a stopped cell's error; the prefixes are a contract."""
        head, advice = self._stop_reason_words()
        if kept:
            return f"{head} (interrupted; variables are kept). {advice}".rstrip()
        how = (
            "it did not stop when interrupted"
            if self._interrupted_at is not None
            else "the kernel never entered the cell (no sign of life)"
        )
        lost = f". {self._lost()}" if self.restores else ": all variables were lost."
        return f"{head}; {how}, so the kernel was killed and restarted{lost} {advice}".rstrip()

    def _lost(self, *, next_cell: bool = False) -> str:
        """What became of the variables when the kernel went with the cell and checkpoints
        are on (``next_cell``: the next cell starts the new kernel; else it was started at
        once)."""
        saved = "the variables saved after the last finished cell from the checkpoint"
        new = "The next cell starts a new kernel, which restores" if next_cell else (
            "The new kernel restores"
        )  # fmt: skip
        return f"What this cell changed was lost. {new} {saved} (the next cell's logs say which)."

    def _stop_reason_words(self) -> tuple[str, str]:
        """What stopped the cell, and what to do about it next time."""
        timeouts = self.timeouts
        if self.stop_reason == "timeout":
            head = f"Cell timed out after {timeouts.total:g}s"
            return head, advice("hard" if timeouts.hard else "total")
        if self.stop_reason == "inactivity":
            return (
                f"Cell stopped after {timeouts.inactivity:g}s without a sign of life (no "
                "output, no heartbeat: C code held the interpreter, or the process was "
                "stopped)",
                advice("inactivity"),
            )
        if self.stop_reason == "violation":
            return self._violation_words(), ""
        return "Cell cancelled", ""

    def _finish_done(self, message: dict[str, object]) -> Cell:
        status = message.get("status")
        cell = self.cell
        result = message.get("result")
        cell.result = clean_text(result) if isinstance(result, str) else None
        if cell.result is None:
            cell.result_data = {}
        error = clean_text(str(message.get("error") or ""))
        self.ckpt = message.get("ckpt")
        for line in checkpoint.failure_lines(self.ckpt):  # never the cell's error
            self.logs.append(clean_text(line))
        if status == "ok":
            cell.status = "ok"
            if self._interrupted_at is not None:
                words = self._stop_reason_words()[0]
                self.logs.append(f"{words}: the cell caught the interrupt and finished.")
        elif status == "interrupted":
            cell.status = "cancelled" if self.stop_reason in (None, "cancelled") else "timeout"
            if self.stop_reason is None:
                self.stop_reason = "cancelled"  # an outside SIGINT: the user stopped it
            cell.error = f"{self._stop_text(kept=True)}\n{error}".rstrip() + "\n"
        else:
            cell.status = "error"
            cell.error = error or "unknown error"
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
        self.kernel.kill()
        self.cell.status = "killed"
        self.cell.error = self._stop_text(kept=False) + "\n"
        await self.on_killed(self)

    async def _aborted(self) -> None:
        """Killed because the pad itself is going (reset, close, remove): no restart here."""
        self.kernel.kill()
        self.stop_reason = "aborted"
        self.cell.status = "killed"
        self.cell.error = f"{self._abort_text}\n"

    async def _exited(self) -> None:
        code = await self.kernel.wait_exit(2.0)
        cause = self.kernel.protocol_error or self.kernel.describe_exit(code)
        self.died = True
        self.cell.status = "killed"
        lost = self._lost(next_cell=True) if self.restores else ""
        if self.kernel.stop_reason is not None:  # past a limit: the next cell says what holds
            self.cell.error = (
                f"The pad's kernel was stopped while running this cell: "
                f"{self.kernel.stop_reason}. {lost or 'All variables were lost.'}\n"
            )
            return
        self.cell.error = (
            f"The pad's kernel {cause} while running this cell. {lost}\n"
            if lost
            else f"The pad's kernel {cause} while running this cell; all variables were lost. "
            "The next cell starts a fresh kernel.\n"
        )

    def _finish(self) -> Cell:
        cell = self.cell
        if self.finished:
            return cell
        displays = self.displays.items()
        cell.stdout, out_at = self.channels["stdout"].finish([out for _, out, _ in displays])
        cell.stderr, err_at = self.channels["stderr"].finish([err for _, _, err in displays])
        cell.code, cell.error = scrub(cell.code), cell.error and scrub(cell.error)
        cell.description = scrub(cell.description)
        cell.result = None if cell.result is None else scrub(cell.result)
        for name, channel in self.channels.items():
            buffer = channel.buffer
            if buffer.dropped:
                self.logs.append(
                    f"{name}: {buffer.total} bytes written, "
                    f"{buffer.dropped} dropped from the middle (cap per stream)"
                )
        cell.outputs = [bundle for bundle, _, _ in displays]
        cell.outputs_at = [[out, err] for out, err in zip(out_at, err_at, strict=True)]
        if self.displays.dropped:
            self.logs.append(
                f"displays: {self.displays.dropped} ({self.displays.dropped_size} bytes) "
                "dropped from the middle (cap per cell)"
            )
        cell.logs = scrub(_log_text(self.logs))
        cell.duration_s = round(time.perf_counter() - self._began, 6)
        self.kernel.on_started = None
        self.finished = True
        self.on_finished(self)
        self.done_event.set()
        return cell


class Channel:
    """One output stream of a cell: its bytes (head + tail kept) and its text scrubbed as it
    streams. When all of it streamed, the scrubbed pieces are the cell's text: one scrub
    per byte, not two. Marks (:meth:`mark`) say where displays came among its text."""

    def __init__(self, cap: int) -> None:
        self.buffer = CappedOutput(cap)
        self.held = ""  # what the scrubber still held when the stream ended
        self._stream = scrubber().stream()
        self._pieces: list[str] = []
        self._passed = 0  # characters passed on

    def append(self, data: bytes) -> str:
        """Keep ``data``; the scrubbed text to stream now (none once past the head)."""
        streamed = self.buffer.append(data)
        text = self._stream.feed(streamed) if streamed else ""
        if text:
            self._pieces.append(text)
            self._passed += len(text)
        return text

    def mark(self, passed_after: int = 0) -> Mark:
        """Where the stream stands now, less ``passed_after`` bytes already passed on that
        were written after the display. What the scrubber holds back counts as passed on:
        it keeps its length unless it is part of a secret."""
        buffer = self.buffer
        written = max(0, buffer.total - passed_after)
        if written > len(buffer.head):
            return None, written
        passed = self._passed + self._stream.held_chars
        if written < buffer.total:
            passed -= len(buffer.head[written:].decode("utf-8", "replace"))
        return max(0, passed), written

    def finish(self, marks: Sequence[Mark] = ()) -> tuple[str, list[int]]:
        """End the stream (its held tail goes to :attr:`held`); the whole scrubbed text, and
        each mark as a place in it (a mark in a dropped middle: just after the note)."""
        past_head = bool(self.buffer.tail)  # the stream stopped at the head: a cut
        ending = self._stream.feed(self.buffer.end_stream())
        self.held = ending + self._stream.flush(cut=past_head)
        if not past_head:
            text = "".join(self._pieces) + self.held
            return text, [min(passed or 0, len(text)) for passed, _ in marks]
        head, note, tail, tail_bytes = self.buffer.parts(trim=scrubber().trim_cut)
        head = scrub(head)
        after_note = len(head) + len(note)
        tail_from = self.buffer.total - len(tail_bytes)  # where the kept tail begins
        places = [after_note if passed is None else min(passed, len(head)) for passed, _ in marks]
        in_tail = [i for i, (passed, n) in enumerate(marks) if passed is None and n > tail_from]
        rest = chars_after(tail_bytes, [marks[i][1] - tail_from for i in in_tail])
        tail, moved = scrubber().scrub_marked(tail, [max(0, len(tail) - n) for n in rest])
        for i, place in zip(in_tail, moved, strict=True):
            places[i] = after_note + place
        return head + note + tail, places


def _placed_size(placed: Placed) -> int:
    return bundle_size(placed[0])


def scrub_message(text: str) -> str:
    """A progress message scrubbed; where the kernel cut its middle (the note of
    ``worker.cut_text``), what could be part of a secret on either side of the cut goes."""
    cut = KERNEL_CUT.search(text)
    if cut is None:
        return scrub(text)
    head, tail = scrubber().trim_cut(text[: cut.start()], text[cut.end() :])
    return scrub(head + cut.group() + tail)


def _log_text(logs: CappedItems[str]) -> str:
    lines = list(logs.head)
    if logs.dropped:
        lines.append(
            f"[... {logs.dropped} log lines ({logs.dropped_size} characters) dropped "
            "(kept the first and last part) ...]"
        )
    lines.extend(item for item, _ in logs.tail)
    return "\n".join(lines)


TOO_DEEP = f"its data nests more than {MAX_NESTING} levels deep"


def nests_deeper(value: Any, limit: int) -> bool:
    """Whether JSON-like ``value`` nests more than ``limit`` lists or objects deep; found
    without recursion, so data a kernel sent (up to the JSON decoder's own depth) never
    makes the cleaning and scrubbing that follow exceed the interpreter's recursion limit."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def fit_bundle(bundle: dict[str, Any], cap: int) -> dict[str, Any]:
    """The bundle, or a short text stand-in when it alone is over ``cap`` bytes."""
    size = bundle_size(bundle)
    if size <= cap:
        return bundle
    kinds = ", ".join(sorted(bundle))
    return {"text/plain": f"[a display of {size} bytes ({kinds}) was dropped: over the cap]"}
