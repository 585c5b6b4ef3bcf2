"""The parent's side of one kernel process: spawn, channel, output pipes, signals, reaping.

The kernel gets four pipes: control in, control out (passed with ``pass_fds``), and its own
fd 1 and fd 2. The parent reads the three incoming pipes from the event loop with non-blocking
``os.read`` and queues what it gets as events. When a ``done`` frame arrives the output pipes
are drained first, so every byte the cell wrote before finishing belongs to that cell. When
more than ``MAX_QUEUED_BYTES`` of output wait unconsumed, reading pauses and the kernel's
writes block (flow control) until the queue is taken.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import fcntl
import json
import os
import signal
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scratchpad.errors import KernelStartError, SandboxError
from scratchpad.runtime.inkernel import protocol
from scratchpad.runtime.procgroup import ProcessGroup
from scratchpad.runtime.sandboxing import TRUSTED_FLAGS

WORKER_PATH = Path(__file__).parent / "inkernel" / "worker.py"
READ_SIZE = 1 << 20
PIPE_SIZE = 1 << 20  # bigger pipes: a cell can write 1 MiB without waiting for the parent
MAX_QUEUED_BYTES = 8 << 20  # output queued but not consumed before reading pauses
# Frames whose place among the output matters: output written before them is in the pipes.
ORDERED_AFTER_OUTPUT = frozenset({"done", "progress", "display"})

# An event is (kind, payload): ("stdout"|"stderr", bytes), ("msg", dict) or ("exit", None).
Event = tuple[str, Any]

_LIVE: weakref.WeakSet[KernelProcess] = weakref.WeakSet()


class KernelProcess:
    """A running worker. Create with :meth:`spawn`; always finish with :meth:`stop`."""

    def __init__(
        self, group: ProcessGroup, ctrl_w: int, ctrl_r: int, out_r: int, err_r: int
    ) -> None:
        self.group = group
        self.pid = group.pid
        self._ctrl_w = ctrl_w
        self._fds = {ctrl_r: "ctrl", out_r: "stdout", err_r: "stderr"}
        self._ctrl_r, self._out_r, self._err_r = ctrl_r, out_r, err_r
        self._open_outputs = {out_r, err_r}
        self._queued_bytes = 0
        self._paused = False
        self.done_queued = 0  # the kernel answered; the listener has not got there yet
        self._decoder = protocol.FrameDecoder()
        self._events: collections.deque[Event] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._loop = asyncio.get_running_loop()
        # Signs of life are kept here, not queued: a heartbeat or "started" must not cost
        # the listener a wake-up of its own.
        self.last_alive = self._loop.time()  # the last output or frame from the kernel
        self.started: str | None = None  # the id the kernel reported entering (reset by
        self.on_started: Callable[[], None] | None = None  # the caller before each cell)
        self.on_exit: Callable[[KernelProcess], None] | None = None  # its channel closed
        self.channel_closed = False
        self.protocol_error: str | None = None
        self.stop_reason: str | None = None  # why it was stopped past a limit (limits.py)
        self.ready: dict[str, Any] = {}  # the ready frame (pid, python, sandbox)
        for fd in self._fds:
            os.set_blocking(fd, False)
            self._loop.add_reader(fd, self._on_readable, fd)
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
        argv = [
            str(python),
            *TRUSTED_FLAGS,
            str(worker),
            str(to_kernel_r),
            str(from_kernel_w),
            json.dumps(config),
        ]
        try:
            group = ProcessGroup.spawn(
                argv,
                stdout=out_w,
                stderr=err_w,
                pass_fds=(to_kernel_r, from_kernel_w),
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
            self._loop.remove_reader(fd)
            self._open_outputs.discard(fd)
            if kind == "ctrl":
                self.channel_closed = True
                self._drain_outputs()
                self._push(("exit", None))
            return
        if kind != "ctrl":
            self._push((kind, data))
            if self._queued_bytes > MAX_QUEUED_BYTES and not self._paused:
                self._pause_outputs()
            return
        try:
            messages = self._decoder.feed(data)
        except (protocol.ProtocolError, ValueError) as exc:
            self._on_protocol_error(str(exc))
            return
        for message in messages:
            frame_type = message.get("type")
            if frame_type == "heartbeat":
                continue
            if frame_type == "started":
                self.started = str(message.get("id", ""))
                if self.on_started is not None:
                    self.on_started()
                continue
            if frame_type in ORDERED_AFTER_OUTPUT:
                self._drain_outputs()  # what the cell printed before this came first
            self._push(("msg", message))

    def _on_protocol_error(self, error: str) -> None:
        """Garbage on the control channel: the kernel cannot be trusted any more; kill it."""
        self.protocol_error = f"sent an invalid control frame ({error}) and was stopped"
        self.group.kill_now()
        self._loop.remove_reader(self._ctrl_r)
        self.channel_closed = True
        self._drain_outputs()
        self._push(("exit", None))

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
                self._push((kind, data))

    def _pause_outputs(self) -> None:
        """Flow control: nobody consumes output, so stop reading; the kernel's writes block."""
        self._paused = True
        for fd in self._open_outputs:
            self._loop.remove_reader(fd)

    def _take(self) -> Event:
        event = self._events.popleft()
        if event[0] == "msg" and event[1].get("type") == "done":
            self.done_queued -= 1
        elif event[0] in ("stdout", "stderr"):
            self._queued_bytes -= len(event[1])
            if self._paused and self._queued_bytes <= MAX_QUEUED_BYTES // 2:
                self._paused = False
                for fd in self._open_outputs:
                    self._loop.add_reader(fd, self._on_readable, fd)
        return event

    def _push(self, event: Event) -> None:
        if event[0] == "exit" and self.on_exit is not None:
            self.on_exit(self)
        if event[0] == "msg" and event[1].get("type") == "done":
            self.done_queued += 1
        elif event[0] in ("stdout", "stderr"):
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
        """Send a frame; False when the kernel is gone (the caller reports the exit)."""
        if self.channel_closed:
            return False
        try:
            protocol.write_all(self._ctrl_w, protocol.encode(message))
        except (BrokenPipeError, OSError):
            return False
        return True

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
        for fd in list(self._fds):
            with contextlib.suppress(ValueError, RuntimeError):
                self._loop.remove_reader(fd)
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()
        with contextlib.suppress(OSError):
            os.close(self._ctrl_w)
        self.channel_closed = True
        self.group.close()
        _LIVE.discard(self)


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
