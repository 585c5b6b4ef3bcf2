"""The one process-group runner: spawn a child as the leader of its own session, stop it with
the ladder (interrupt → grace → SIGTERM → grace → SIGKILL), reap it; and :func:`run` for
helper programs (uv, the shell tool) whose capped output is kept even when they time out.

Modelled on jupyter_client's local provisioner: a signal to the group reaches everything the
child started in it. Descendants that left the group (``setsid()``, ``setpgid()``) are found
through the process tree and killed first, while the leader is still alive: a kernel makes
itself a child subreaper, so even their orphans stay below it until then. A child may also
carry a tag (``SCRATCHPAD_PROCESS_TAG`` in its environment, inherited by what it starts): when
the leader died on its own, its orphans are found by that tag; and a server starting up
finds those of a predecessor that was killed (the tag names its owner's pid).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from scratchpad.runtime.proctree import (
    TAG,
    cgroup_oom_kills,
    descendants,
    descendants_async,
    group_alive,
    is_stray,
    kill,
    kill_tagged,
)

KILL_WAIT_S = 5.0  # how long a SIGKILLed process may take to be reaped
STRAY_ROUNDS = 5  # passes over the tree: each kill may hand orphans up to the leader
POLL_S = 0.02

Pipe = int | IO[Any] | None


class ProcessGroup:
    """A child leading its own process group. Create with :meth:`spawn`; end with :meth:`stop`
    (or :meth:`kill_now` where nothing may be awaited)."""

    def __init__(self, proc: subprocess.Popen[bytes], tag: str | None = None) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.tag = tag
        self.killed_by_us = False
        self._oom_kills_at_start = cgroup_oom_kills()
        self._pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):  # Linux ≥ 5.3
            self._pidfd = os.pidfd_open(proc.pid)
        self._exited: asyncio.Future[None] | None = None

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        stdin: Pipe = subprocess.DEVNULL,
        stdout: Pipe = None,
        stderr: Pipe = None,
        pass_fds: Sequence[int] = (),
        tag: str | None = None,
    ) -> ProcessGroup:
        """Start ``argv`` in a new session (so it leads a new process group), tagged with
        ``tag`` (see :func:`new_tag`) when given; OSError when it cannot be started."""
        if tag is not None:
            env = {**(os.environ if env is None else env), TAG: tag}
        proc = subprocess.Popen(
            list(argv),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            pass_fds=tuple(pass_fds),
            start_new_session=True,
            cwd=cwd,
            env=env,
        )
        return cls(proc, tag)

    # -- state ------------------------------------------------------------------------------
    @property
    def returncode(self) -> int | None:
        """The exit code once reaped (negative: killed by that signal); None while it runs."""
        return self.proc.poll()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def oom_killed(self) -> bool:
        """Whether the OOM killer acted in this process's cgroup since it started."""
        now = cgroup_oom_kills()
        start = self._oom_kills_at_start
        return now is not None and start is not None and now > start

    # -- signals ----------------------------------------------------------------------------
    def send_signal(self, sig: int) -> bool:
        """Send ``sig`` to the whole group; False when nothing of the group is left."""
        if sig == signal.SIGKILL:
            self.killed_by_us = True
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def kill_now(self) -> None:
        """SIGKILL to strays, the group and the leader, without waiting (atexit, cancel)."""
        if self.alive:
            for pid in descendants(self.pid):
                kill(pid, signal.SIGKILL)
        self.send_signal(signal.SIGKILL)

    # -- waiting ----------------------------------------------------------------------------
    async def wait(self, timeout: float) -> int | None:
        """Reap the leader; its return code, or None if it still runs after ``timeout``."""
        code = self.proc.poll()
        if code is not None or timeout <= 0:
            return code
        if self._pidfd is None:
            return await self._poll_exit(timeout)
        exited = self._exit_future()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await asyncio.shield(exited)
        return self.proc.poll()

    def _exit_future(self) -> asyncio.Future[None]:
        """Resolved when the pidfd says the leader exited (one reader for every waiter)."""
        if self._exited is None:
            loop = asyncio.get_running_loop()
            self._exited = loop.create_future()
            pidfd = self._pidfd
            assert pidfd is not None

            def on_exit() -> None:
                loop.remove_reader(pidfd)
                if self._exited is not None and not self._exited.done():
                    self._exited.set_result(None)

            loop.add_reader(pidfd, on_exit)
        return self._exited

    async def _poll_exit(self, timeout: float) -> int | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay = 0.0005
        while (code := self.proc.poll()) is None:
            if loop.time() >= deadline:
                return None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
        return code

    # -- the ladder -------------------------------------------------------------------------
    async def stop(
        self,
        grace: float,
        *,
        first: signal.Signals = signal.SIGINT,
        ask: Callable[[], bool] | None = None,
    ) -> int | None:
        """Stop everything of the child; its return code.

        Strays (descendants outside the group) die first, while the leader still holds them;
        then ``ask()`` (a polite request; True if it was sent) and ``grace`` to exit, then
        ``first`` → grace → SIGTERM → grace → SIGKILL of the group; last, what is left of
        the group gets SIGTERM and, after ``grace``, SIGKILL. A cancelled stop kills at once.
        """
        try:
            died_alone = not self.alive
            if died_alone and self.tag is not None:
                await kill_tagged(self.tag)  # its orphans went up to init: find them by tag
            elif not died_alone:
                await self._kill_strays()
            code = self.proc.poll()
            if code is None and ask is not None and ask():
                code = await self.wait(grace)
            for sig in (first, signal.SIGTERM):
                if code is not None:
                    break
                self.send_signal(sig)
                code = await self.wait(grace)
            if code is None:
                self.send_signal(signal.SIGKILL)
                code = await self.wait(KILL_WAIT_S)
            await self._end_group(grace)
            return code
        except asyncio.CancelledError:
            self.kill_now()
            raise

    async def _kill_strays(self) -> None:
        """SIGKILL the live descendants that left the group (theirs reparent to the leader,
        so the next pass finds them)."""
        for _ in range(STRAY_ROUNDS):
            strays = [pid for pid in await descendants_async(self.pid) if is_stray(pid, self.pid)]
            if not strays:
                return
            for pid in strays:
                kill(pid, signal.SIGKILL)

    async def _end_group(self, grace: float) -> None:
        """What is left of the group after the leader: SIGTERM, then SIGKILL after grace.
        Members that are only zombies (orphans waiting for init to reap them) count as gone."""
        if not self.send_signal(signal.SIGTERM):
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while loop.time() < deadline:
            if not self.send_signal(0) or not await asyncio.to_thread(group_alive, self.pid):
                return
            await asyncio.sleep(POLL_S)
        self.send_signal(signal.SIGKILL)

    def close(self) -> None:
        """Release the pidfd (the process itself is the caller's to stop first)."""
        if self._pidfd is not None:
            if self._exited is not None and not self._exited.done():
                with contextlib.suppress(RuntimeError, ValueError):
                    asyncio.get_running_loop().remove_reader(self._pidfd)
                self._exited.cancel()
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None


# -- helper programs -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RunResult:
    """How a helper program ended: its combined output (head and tail), its code (None if it
    had to be stopped and was not reaped), and whether it ran out of time."""

    output: str
    returncode: int | None
    timed_out: bool


class TextFilter(Protocol):
    """Text on its way through, chunk by chunk (``Scrubber.stream()`` is one)."""

    def feed(self, chunk: str) -> str: ...

    def flush(self) -> str: ...


class CappedText:
    """Keeps the first and last ``cap // 2`` characters of a stream (after ``through``, when
    given), and counts the rest."""

    def __init__(self, cap: int, through: TextFilter | None = None) -> None:
        self.half = max(1, cap // 2)
        self.head = ""
        self.tail = ""
        self.total = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._through = through

    def feed(self, data: bytes, *, final: bool = False) -> None:
        text = self._decoder.decode(data, final=final)
        if self._through is not None:
            text = self._through.feed(text) + (self._through.flush() if final else "")
        self.total += len(text)
        room = self.half - len(self.head)
        if room > 0:
            self.head, text = self.head + text[:room], text[room:]
        if text:
            self.tail = (self.tail + text)[-self.half :]

    def text(self) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted <= 0:
            return self.head + self.tail
        return f"{self.head}\n[... {omitted} characters omitted ...]\n{self.tail}"


async def run(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    output_cap_chars: int = 1 << 20,
    grace: float = 1.0,
    first: signal.Signals = signal.SIGTERM,
    pass_fds: Sequence[int] = (),
    tag: str | None = None,
    through: TextFilter | None = None,
    on_start: Callable[[int], None] | None = None,
) -> RunResult:
    """Run a helper program with stdin closed, stdout and stderr together.

    It ends when the program exits or ``timeout`` passes; then what is left of its group is
    stopped (the ladder from ``first``; with a ``tag``, its processes that left the group
    too), output already written is read for up to ``grace`` more seconds, and the pipe is
    closed even if a process outside the group still holds it. The output goes ``through``
    a filter (the scrubber's stream) before it is capped; ``on_start`` is told the program's
    pid once it runs. Never raises for the program's own failure; OSError when it cannot be
    started.
    """
    output = CappedText(output_cap_chars, through)
    read_fd, write_fd = os.pipe()
    try:
        group = ProcessGroup.spawn(
            argv, cwd=cwd, env=env, stdout=write_fd, stderr=write_fd, pass_fds=pass_fds, tag=tag
        )
    except OSError:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    reader = _PipeReader(read_fd, output)
    try:
        try:
            if on_start is not None:
                on_start(group.pid)
            timed_out = await group.wait(timeout) is None
        finally:
            await group.stop(grace, first=first)
        await reader.closed_within(grace)
    finally:
        reader.close()
        group.close()
    output.feed(b"", final=True)
    return RunResult(output.text(), group.returncode, timed_out)


class _PipeReader:
    """Feeds a pipe's bytes to ``output`` from the event loop until end of file."""

    def __init__(self, fd: int, output: CappedText) -> None:
        self.fd = fd
        self.output = output
        self.loop = asyncio.get_running_loop()
        self.eof = asyncio.Event()
        os.set_blocking(fd, False)
        self.loop.add_reader(fd, self._on_readable)

    def _on_readable(self) -> None:
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.output.feed(data)
            return
        self.loop.remove_reader(self.fd)
        self.eof.set()

    async def closed_within(self, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.eof.wait()
        return self.eof.is_set()

    def close(self) -> None:
        with contextlib.suppress(ValueError, RuntimeError):
            self.loop.remove_reader(self.fd)
        with contextlib.suppress(OSError):
            os.close(self.fd)
