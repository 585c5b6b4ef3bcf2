"""The parent's side of one kernel process: spawn, channel, output pipes, signals, reaping.

The kernel gets four pipes: control in, control out (passed with ``pass_fds``), and its own
fd 1 and fd 2. The parent reads the three incoming pipes from the event loop with non-blocking
``os.read`` and queues what it gets as events. When a ``done`` frame arrives the output pipes
are drained first, so every byte the cell wrote before finishing belongs to that cell. When
more than ``MAX_QUEUED_BYTES`` of output wait unconsumed, reading pauses and the kernel's
writes block (flow control) until the queue is taken.

Frames from the kernel are untrusted (a cell can write to the channel): each length is checked
before its body is read, a large frame is decoded on a worker thread while reading waits (so
order holds), and each frame is bound to what it answers (see :meth:`KernelProcess._route`). A
frame that breaks these rules during a cell ends that cell (a ``violation`` event), and a
``sync`` round trip finds where the kernel's own frames resume.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import fcntl
import logging
import os
import secrets
import signal
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scratchpad.errors import KernelStartError, SandboxError
from scratchpad.runtime.confinement import passed
from scratchpad.runtime.inkernel import protocol
from scratchpad.runtime.procgroup import ProcessGroup
from scratchpad.runtime.sandboxing import TRUSTED_FLAGS

log = logging.getLogger(__name__)
WORKER_PATH = Path(__file__).parent / "inkernel" / "worker.py"
READ_SIZE = 1 << 20
PIPE_SIZE = 1 << 20  # bigger pipes: a cell can write 1 MiB without waiting for the parent
MAX_QUEUED_BYTES = 8 << 20  # output queued but not consumed before reading pauses
CATCH_UP_ROUNDS = 4  # reads of the control pipe per frame while output keeps coming
# Frames whose place among the output matters: output written before them is in the pipes.
ORDERED_AFTER_OUTPUT = frozenset({"done", "progress", "log", "display", "result"})
CELL_FRAMES = frozenset({"started", *ORDERED_AFTER_OUTPUT})  # carry the id of their cell
REPLIES = frozenset(
    {"ack", "installed", "restored", "checkpointed", "flushed"}
)  # carry the id of their request
PASSED = "passed_after"  # in a placed frame: bytes per stream written after it, passed on before

# An event is (kind, payload): ("stdout"|"stderr", bytes), ("msg", dict), ("exit", None),
# ("violation", why): a frame broke the protocol while the running cell ran (end that cell),
# ("synced", (cell id, why)): the kernel is past that cell, whose answer was not taken.
Event = tuple[str, Any]


@dataclass(frozen=True, slots=True)
class _Sync:
    """A ``sync`` sent after a bad frame: the answer that ends it, and what it settles."""

    nonce: str
    answer: bytes  # the whole frame the kernel answers with (scanned for when lost)
    cell: str | None  # the cell sent before it: the kernel is past it once answered
    why: str


_LIVE: weakref.WeakSet[KernelProcess] = weakref.WeakSet()


class KernelProcess:
    """A running worker. Create with :meth:`spawn`; always finish with :meth:`stop`."""

    def __init__(
        self, group: ProcessGroup, ctrl_w: int, ctrl_r: int, out_r: int, err_r: int
    ) -> None:
        self.group = group
        self.pid = group.pid
        self._ctrl_w = ctrl_w
        os.set_blocking(ctrl_w, False)
        self._unsent = bytearray()  # frames to the kernel the pipe could not take yet
        self._fds = {ctrl_r: "ctrl", out_r: "stdout", err_r: "stderr"}
        self._ctrl_r, self._out_r, self._err_r = ctrl_r, out_r, err_r
        self._open_outputs = {out_r, err_r}
        self._ctrl_open = True
        self._watched: set[int] = set()
        self._queued_bytes = 0
        # Bytes read from each output pipe, and how many more than the kernel's own count
        # (output its Python streams did not write: a subprocess's, C code's), as of the
        # last cell's end; see _place.
        self._read = {"stdout": 0, "stderr": 0}
        self._uncounted = {"stdout": 0, "stderr": 0}
        self._paused = False
        self._decoding = False  # a large frame decodes on a thread: reading waits
        self.ends_queued = 0  # the cell's end (done, synced) is queued, not yet taken
        self._reader = protocol.FrameReader()
        self._booted = False  # "ready" came: from now on a bad frame is a violation
        self.cell: str | None = None  # whose frames are taken (set by execute)
        self._violation: str | None = None  # why that cell is being ended
        self._request_id: str | None = None  # whose answer is taken (set by request)
        self._requests = 0
        self._sync: _Sync | None = None
        self._events: collections.deque[Event] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._loop = asyncio.get_running_loop()
        # Signs of life are kept here, not queued: a heartbeat or "started" must not cost
        # the listener a wake-up of its own.
        self.last_alive = self._loop.time()  # the last output or frame from the kernel
        self.started: str | None = None  # the cell the kernel reported entering
        self.on_started: Callable[[], None] | None = None
        self.on_exit: Callable[[KernelProcess], None] | None = None  # its channel closed
        self.channel_closed = False
        self.protocol_error: str | None = None
        self.stop_reason: str | None = None  # why it was stopped past a limit (limits.py)
        self.ready: dict[str, Any] = {}  # the ready frame (pid, python, sandbox)
        for fd in self._fds:
            os.set_blocking(fd, False)
        self._watch()
        _LIVE.add(self)

    # -- start ------------------------------------------------------------------------------
    @classmethod
    async def spawn(
        cls,
        python: Path | str,
        *,
        cwd: Path,
        env: dict[str, str],
        config: dict[str, Any],
        timeout: float,
        worker: Path = WORKER_PATH,
        tag: str | None = None,
    ) -> KernelProcess:
        """Start ``python -I -S worker.py`` (tagged with ``tag``, see procgroup) and wait for
        its ``ready`` frame. ``python`` is a trusted interpreter (the host's, never the pad's
        venv); ``-I -S``: nothing of the pad's (its working directory, its venv's ``.pth``
        files) is imported before the worker has confined itself (``config["confine"]``);
        the worker then loads the venv's site itself."""
        to_kernel_r, to_kernel_w = os.pipe()
        from_kernel_r, from_kernel_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        for fd in (out_w, err_w):
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        config = {**config, "parent_pid": os.getpid()}
        try:
            with passed(config) as config_fd:
                argv = [
                    str(python),
                    *TRUSTED_FLAGS,
                    str(worker),
                    str(to_kernel_r),
                    str(from_kernel_w),
                    f"--config-fd={config_fd}",
                ]
                group = ProcessGroup.spawn(
                    argv,
                    stdout=out_w,
                    stderr=err_w,
                    pass_fds=(to_kernel_r, from_kernel_w, config_fd),
                    cwd=cwd,
                    env=env,
                    tag=tag,
                )
        except OSError as exc:
            for fd in (to_kernel_w, from_kernel_r, out_r, err_r):
                os.close(fd)
            raise KernelStartError(f"could not run {python}: {exc}") from exc
        finally:  # the child's ends, in the parent: closed exactly once, whatever happened
            for fd in (to_kernel_r, from_kernel_w, out_w, err_w):
                os.close(fd)
        kernel = cls(group, to_kernel_w, from_kernel_r, out_r, err_r)
        try:
            await kernel._wait_ready(timeout)
        except BaseException:  # a cancelled start must not leave a kernel behind
            group.kill_now()
            kernel.close_fds()
            raise
        return kernel

    async def _wait_ready(self, timeout: float) -> None:
        deadline = self._loop.time() + timeout
        boot_output = bytearray()
        while True:
            event = await self.next_event(deadline)
            if event is None:
                await self.stop(grace=0.1)
                raise KernelStartError(f"the kernel did not answer within {timeout:g}s")
            kind, payload = event
            if kind == "msg" and payload.get("type") == "ready":
                self.ready = dict(payload)
                return
            if kind == "msg" and payload.get("type") == "refused":
                await self.stop(grace=0.1)
                raise SandboxError(f"the kernel refused to start: {payload.get('error')}")
            if kind in ("stdout", "stderr"):
                boot_output += payload
            elif kind == "exit":
                code = await self.wait_exit(2.0)
                await self.stop(grace=0.1)
                text = boot_output.decode("utf-8", "replace").strip()[-2000:]
                cause = self.protocol_error or self.describe_exit(code)
                raise KernelStartError(
                    f"the kernel {cause} before it was ready" + (f":\n{text}" if text else "")
                )

    # -- events -----------------------------------------------------------------------------
    def _watch(self) -> None:
        """Read the pipes that may be read now: none while a large frame decodes (what comes
        after it waits its turn), the outputs not while flow control holds them."""
        wanted: set[int] = set()
        if not self._decoding:
            if self._ctrl_open:
                wanted.add(self._ctrl_r)
            if not self._paused:
                wanted |= self._open_outputs
        for fd in self._watched - wanted:
            self._loop.remove_reader(fd)
        for fd in wanted - self._watched:
            self._loop.add_reader(fd, self._on_readable, fd)
        self._watched = wanted

    def _on_readable(self, fd: int) -> None:
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        kind = self._fds[fd]
        self.last_alive = self._loop.time()
        if not data:
            self._open_outputs.discard(fd)
            if kind == "ctrl":
                self._ctrl_open = False
                self.channel_closed = True
                self._drain_outputs()
                self._push(("exit", None))
            self._watch()
            return
        if kind != "ctrl":
            self._read[kind] += len(data)
            self._push((kind, data))
            if self._queued_bytes > MAX_QUEUED_BYTES and not self._paused:
                self._paused = True  # nobody consumes output: the kernel's writes block
                self._watch()
            return
        self._reader.feed(data)
        self._read_frames()

    def _read_frames(self) -> None:
        """Take the whole frames read so far, in order; a large one goes to a thread."""
        reader = self._reader
        while self._ctrl_open and not self._decoding:
            try:
                body = reader.next()
            except protocol.ProtocolError as exc:
                self._broken(str(exc))
                continue
            if body is None:
                return
            if len(body) >= protocol.LARGE_FRAME:
                self._drain_outputs()  # now: while it decodes, later output may arrive
                self._decoding = True
                self._watch()
                decoding = self._loop.run_in_executor(None, protocol.decode, body)
                decoding.add_done_callback(self._on_decoded)
                return
            try:
                message = protocol.decode(body)
            except protocol.ProtocolError as exc:
                self._broken(str(exc))
                continue
            self._route(message)

    def _on_decoded(self, decoding: asyncio.Future[dict[str, object]]) -> None:
        self._decoding = False
        if not self._fds or decoding.cancelled():
            return  # stopped meanwhile
        try:
            message = decoding.result()
        except protocol.ProtocolError as exc:
            self._broken(str(exc))
        except MemoryError:
            self._broken("a frame too large to decode")
        else:
            self._route(message, drained=True)
        self._read_frames()
        self._watch()

    def _route(self, message: dict[str, Any], *, drained: bool = False) -> None:
        """Queue what a frame means, if it means anything now.

        Cell frames count only for the cell sent last (``cell``) and, until its ``started``,
        not at all: before it the kernel is still in earlier code (e.g. a cell that forged its
        own ``done``, whose real one comes later). Answers count only for the request sent
        last. A frame for another cell, or a second ``started``, is a violation.
        """
        kind = message["type"]
        if kind == "heartbeat":
            return
        if kind in CELL_FRAMES:
            self._route_cell_frame(kind, message, drained)
        elif kind in REPLIES:
            if self._request_id is not None and message.get("id") == self._request_id:
                self._request_id = None
                self._push(("msg", message))
        elif kind == "synced":
            self._on_synced(message)
        elif not self._booted and kind in ("ready", "refused"):
            self._booted = kind == "ready"
            self._push(("msg", message))

    def _route_cell_frame(self, kind: str, message: dict[str, Any], drained: bool) -> None:
        cell = self.cell
        if cell is None or self._violation is not None:
            return  # between cells, or the cell is being ended: nothing more is taken
        same = message.get("id") == cell
        if self.started is None:
            if same and kind == "started":
                self.started = cell
                if self.on_started is not None:
                    self.on_started()
            return
        if kind == "started" or not same:
            what = "a second 'started' frame" if same else f"a {kind!r} frame for another cell"
            self._violate(f"The kernel sent {what}")
            return
        if not drained:
            self._catch_up()  # what the cell printed before this came first
        if kind == "done":
            self.cell = None
        self._place(message)

    def _place(self, message: dict[str, Any]) -> None:
        """Queue a frame where it stands among the output. The pipes were just drained, so
        the queue may end with output the cell wrote after this frame; the frame's counts
        of bytes written (``out``, ``err``) say how much of each stream, and that output
        goes after it (between lines: see _line_end). Output written after it that was
        already passed on is counted in the frame (``PASSED``: bytes per stream). A cell's
        ``done`` comes after all its output and resets what the counts miss."""
        marks = {
            stream: written
            for stream, key in (("stdout", "out"), ("stderr", "err"))
            if isinstance(written := message.get(key), int) and not isinstance(written, bool)
        }
        if message["type"] == "done":
            for stream, written in marks.items():
                self._uncounted[stream] = max(0, self._read[stream] - written)
            self._push(("msg", message))
            return
        later = {s: self._read[s] - self._uncounted[s] - w for s, w in marks.items()}
        before: list[Event] = []  # the output queued since the last frame, newest first
        after: list[Event] = []
        while self._events and self._events[-1][0] in ("stdout", "stderr"):
            stream, data = self._events.pop()
            due = later.get(stream, 0)
            if due <= 0:
                before.append((stream, data))
                continue
            if len(data) > due:  # written partly before the frame, partly after
                cut = _line_end(data, len(data) - due)
                before.append((stream, data[:cut]))
                data = data[cut:]
                later[stream] = 0
            else:
                later[stream] = due - len(data)
            if data:
                after.append((stream, data))
        self._events.extend(reversed([event for event in before if event[1]]))
        passed = {stream: due for stream, due in later.items() if due > 0}
        self._push(("msg", {**message, PASSED: passed}))  # ours, whatever the frame said
        self._events.extend(reversed(after))

    def _broken(self, what: str) -> None:
        """A frame that could not be read: before ``ready`` the kernel is unusable; later
        the stream may be misaligned, so it is skipped up to the kernel's answer to a sync."""
        if not self._booted:
            self._on_protocol_error(what)
            return
        self._violate(f"The kernel sent {what}", lost=True)

    def _violate(self, why: str, *, lost: bool = False) -> None:
        """A frame broke the protocol. The running cell (if the kernel is in it) is told to
        end; a ``sync`` finds the point where the kernel is past it (and, when ``lost``, where
        its frames resume)."""
        blamed = self.cell is not None and self.started is not None and self._violation is None
        if blamed:
            self._violation = why
        if self._sync is None:
            nonce = secrets.token_hex(8)
            answer = protocol.encode({"type": "synced", "nonce": nonce})
            self._sync = _Sync(nonce, answer, self.cell, why)
            self.send({"type": "sync", "nonce": nonce})
        if lost:
            self._reader.lose(self._sync.answer)
        if blamed:
            self._push(("violation", why))
        else:
            log.debug("kernel %d: %s (no cell of it runs)", self.pid, why)

    def _on_synced(self, message: dict[str, Any]) -> None:
        sync = self._sync
        if sync is None or message.get("nonce") != sync.nonce:
            return  # not the answer to our sync: forged, or stale
        self._sync = None
        if sync.cell is not None and sync.cell == self.cell:
            self.cell = None
            self._drain_outputs()  # the kernel flushed them when it finished that cell
            self._push(("synced", (sync.cell, sync.why)))

    def _on_protocol_error(self, error: str) -> None:
        """Garbage on the control channel before ``ready``: the kernel is unusable; kill it."""
        self.protocol_error = f"sent an invalid control frame ({error}) and was stopped"
        self.group.kill_now()
        self._ctrl_open = False
        self._watch()
        self.channel_closed = True
        self._drain_outputs()
        self._push(("exit", None))

    def _catch_up(self) -> None:
        """Drain the output pipes, then take in (unrouted) what the control pipe holds, and
        again while it held more: every frame the kernel wrote before the output read is
        then known and is placed (see _place) before a listener can take that output."""
        for _ in range(CATCH_UP_ROUNDS):
            self._drain_outputs()
            try:
                data = os.read(self._ctrl_r, READ_SIZE)
            except (BlockingIOError, OSError):
                return
            if not data:
                return  # the end of the channel: _on_readable sees it too
            self.last_alive = self._loop.time()
            self._reader.feed(data)

    def _drain_outputs(self) -> None:
        """Read the output pipes until they are empty (the kernel flushed before ``done``)."""
        for fd, kind in ((self._out_r, "stdout"), (self._err_r, "stderr")):
            while True:
                try:
                    data = os.read(fd, READ_SIZE)
                except (BlockingIOError, OSError):
                    break
                if not data:
                    break
                self._read[kind] += len(data)
                self._push((kind, data))

    def _take(self) -> Event:
        event = self._events.popleft()
        kind = event[0]
        if kind == "synced" or (kind == "msg" and event[1]["type"] == "done"):
            self.ends_queued -= 1
        elif kind in ("stdout", "stderr"):
            self._queued_bytes -= len(event[1])
            if self._paused and self._queued_bytes <= MAX_QUEUED_BYTES // 2:
                self._paused = False
                self._watch()
        return event

    def _push(self, event: Event) -> None:
        if event[0] == "exit" and self.on_exit is not None:
            self.on_exit(self)
        kind = event[0]
        if kind == "synced" or (kind == "msg" and event[1]["type"] == "done"):
            self.ends_queued += 1
        elif kind in ("stdout", "stderr"):
            self._queued_bytes += len(event[1])
        self._events.append(event)
        self.wake()

    def wake(self) -> None:
        """Make a pending :meth:`next_event` return now (None when nothing is queued)."""
        if self._waiter is not None:
            _resolve(self._waiter)

    async def next_event(self, deadline: float | None) -> Event | None:
        """The next event, or None when ``deadline`` (loop time) passed or :meth:`wake` ran."""
        if self._events:
            return self._take()
        waiter = self._loop.create_future()
        self._waiter = waiter
        timer = self._loop.call_at(deadline, _resolve, waiter) if deadline is not None else None
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
        return self._take() if self._events else None

    def pending_events(self) -> list[Event]:
        """Take every queued event without waiting (output that arrived between cells)."""
        return [self._take() for _ in range(len(self._events))]

    # -- commands ---------------------------------------------------------------------------
    def send(self, message: dict[str, object]) -> bool:
        """Send a frame; False when the kernel is gone (the caller reports the exit).

        Never blocks: what the pipe cannot take now (the kernel is busy in a cell, or a cell
        filled the pipe itself) waits here and is written as the kernel reads.
        """
        if self.channel_closed:
            return False
        frame = protocol.encode(message)
        if self._unsent:
            self._unsent += frame
            return True
        try:
            written = os.write(self._ctrl_w, frame)
        except BlockingIOError:
            written = 0
        except OSError:
            return False
        if written < len(frame):
            self._unsent += frame[written:]
            self._loop.add_writer(self._ctrl_w, self._write_unsent)
        return True

    def _write_unsent(self) -> None:
        try:
            written = os.write(self._ctrl_w, self._unsent)
        except BlockingIOError:
            return
        except OSError:  # the kernel is gone: its exit is reported by the reading side
            written = len(self._unsent)
        del self._unsent[:written]
        if not self._unsent:
            self._loop.remove_writer(self._ctrl_w)

    def execute(self, cell_id: str, code: str, number: int = 0) -> bool:
        """Run a cell (``number``: its number in the pad, for its tracebacks); from now on the
        cell frames taken are this cell's (see :meth:`_route`). False when the kernel is gone."""
        self.cell, self.started, self._violation = cell_id, None, None
        return self.send({"type": "execute", "code": code, "id": cell_id, "number": number})

    def request(self, message: dict[str, object]) -> bool:
        """Ask the idle kernel something; only the answer that carries this request's id is
        queued (a forged or late one is dropped). False when the kernel is gone."""
        self._requests += 1
        self._request_id = f"r{self._requests}"
        return self.send({**message, "id": self._request_id})

    def interrupt(self) -> None:
        self.group.send_signal(signal.SIGINT)

    def kill(self) -> None:
        """SIGKILL the kernel, its group and its strays now (the ladder's last step)."""
        self.group.kill_now()

    @property
    def alive(self) -> bool:
        return self.group.alive

    @property
    def killed_by_us(self) -> bool:
        return self.group.killed_by_us

    async def wait_exit(self, timeout: float) -> int | None:
        """Reap the process; its return code, or None if it is still running after timeout."""
        return await self.group.wait(timeout)

    def describe_exit(self, code: int | None) -> str:
        if self.stop_reason is not None:
            return f"was stopped: {self.stop_reason}"
        return describe_exit(code, self.group.killed_by_us, self.group.oom_killed())

    def stop_for(self, reason: str) -> None:
        """Called (from any thread) just before the kernel is killed for going past a limit."""
        self.stop_reason = reason
        self.group.killed_by_us = True

    async def stop(self, grace: float = 1.0) -> int | None:
        """Ask politely, then the ladder (SIGINT → SIGTERM → SIGKILL); reap, close the pipes.

        Descendants that left the kernel's group die first, what is left of the group last,
        so nothing a cell started outlives its pad.
        """
        try:
            return await self.group.stop(grace, ask=lambda: self.send({"type": "shutdown"}))
        finally:
            self.close_fds()

    def close_fds(self) -> None:
        self._open_outputs.clear()
        self._ctrl_open = False
        self._watched.clear()
        for fd in list(self._fds):
            with contextlib.suppress(ValueError, RuntimeError):
                self._loop.remove_reader(fd)
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()
        self._unsent.clear()
        if self._ctrl_w >= 0:  # once: a second close could hit a reused fd number
            with contextlib.suppress(ValueError, RuntimeError):
                self._loop.remove_writer(self._ctrl_w)
            with contextlib.suppress(OSError):
                os.close(self._ctrl_w)
            self._ctrl_w = -1
        self.channel_closed = True
        self.group.close()
        _LIVE.discard(self)


def _line_end(data: bytes, cut: int) -> int:
    """``cut``, or past the end of the line it falls in: a frame goes between lines (what
    the counts miss, e.g. a subprocess's output, must not split a line around it)."""
    if data[cut - 1 : cut] == b"\n":
        return cut
    end = data.find(b"\n", cut)
    return len(data) if end < 0 else end + 1


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def describe_exit(code: int | None, killed_by_us: bool, oom_killed: bool = False) -> str:
    """Human words for a return code: exit code or signal name; "out of memory" only when
    the cgroup's OOM killer says so."""
    if code is None:
        return "did not exit"
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    if -code == signal.SIGKILL and oom_killed:
        return f"was killed by {name}: out of memory (the OOM killer of its cgroup acted)"
    if -code == signal.SIGKILL and not killed_by_us:
        return f"was killed by {name} from outside Scratchpad"
    return f"was killed by {name}"


@atexit.register
def _kill_leftovers() -> None:
    """Never leave kernels behind when the parent exits without closing its pads."""
    for kernel in list(_LIVE):
        kernel.group.kill_now()
        with contextlib.suppress(Exception):
            kernel.group.proc.wait(timeout=1)
