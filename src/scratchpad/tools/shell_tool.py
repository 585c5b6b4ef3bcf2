"""The ``shell`` tool: one ``/bin/sh -c`` command with a timeout, its output capped.

Off unless an agent enables it (whoever registers the tool decides; nothing offers it by
default). The command runs in its own process group with stdin closed; stdout and stderr are
read together, in order, keeping the head and the tail when there is too much. When the call
ends (``sh`` exited, timed out, or the call was cancelled) the whole group gets SIGTERM, then
SIGKILL after a grace period, so no background child outlives the call. The answer always
ends with the exit code (or the timeout, when ``sh`` itself was still running).
"""

from __future__ import annotations

import asyncio
import codecs
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scratchpad.errors import InvalidInputError
from scratchpad.tools.base import ToolDef, ToolOutcome

NAME = "shell"
KILL_GRACE_S = 1.0
DRAIN_AFTER_STOP_S = 1.0
POLL_S = 0.02


@dataclass(frozen=True, slots=True)
class ShellResult:
    output: str
    returncode: int | None
    timed_out: bool


class CappedText:
    """Keeps the first and last ``cap // 2`` characters of a stream, and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.half = max(1, cap // 2)
        self.head = ""
        self.tail = ""
        self.total = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, *, final: bool = False) -> None:
        text = self._decoder.decode(data, final=final)
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


class _Pipe(asyncio.SubprocessProtocol):
    """Feeds the command's output to ``output``; says when ``sh`` exited and the pipe closed."""

    def __init__(self, output: CappedText) -> None:
        self.output = output
        self.exited = asyncio.Event()
        self.closed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:
        self.output.feed(bytes(data))

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.closed.set()

    def process_exited(self) -> None:
        self.exited.set()


async def run_shell(
    command: str, *, cwd: Path | None, timeout_s: float, output_cap_chars: int
) -> ShellResult:
    """Run ``command``; never raises for the command's own failure or a timeout.

    The call ends when ``sh`` exits (or times out): then whatever is left of its process
    group (background children) is stopped, what was already written is read, and the pipe
    is closed even if a process outside the group still holds it.
    """
    output = CappedText(output_cap_chars)
    transport, pipe = await asyncio.get_running_loop().subprocess_exec(
        lambda: _Pipe(output),
        "/bin/sh",
        "-c",
        command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        try:
            timed_out = not await _within(pipe.exited, timeout_s)
        finally:  # always, also when the call is cancelled
            await _stop_group(transport.get_pid(), pipe.exited)
        await _within(pipe.closed, DRAIN_AFTER_STOP_S)
    finally:
        transport.close()
    output.feed(b"", final=True)
    return ShellResult(output.text(), transport.get_returncode(), timed_out)


async def _within(event: asyncio.Event, timeout_s: float) -> bool:
    """Whether ``event`` is set within ``timeout_s`` seconds."""
    try:
        await asyncio.wait_for(event.wait(), timeout_s)
    except TimeoutError:
        return False
    return True


async def _stop_group(pgid: int, exited: asyncio.Event) -> None:
    """SIGTERM to the command's process group, SIGKILL to what is left after a grace period
    (at once if this wait is cancelled); then wait for ``sh`` to be reaped."""
    if _signal_group(pgid, signal.SIGTERM):
        try:
            await _group_gone(pgid, KILL_GRACE_S)
        finally:
            _signal_group(pgid, signal.SIGKILL)
    await _within(exited, KILL_GRACE_S)


async def _group_gone(pgid: int, timeout_s: float) -> bool:
    """Whether no process of the group is left within ``timeout_s`` (a zombie counts as
    left: an orphan is reaped by init, if ever, so this may wait the whole time)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while _signal_group(pgid, 0):
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(POLL_S)
    return True


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False when no process is left in it."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def shell_tool(
    *, cwd: Path | None = None, timeout_s: float = 30.0, output_cap_chars: int = 10_000
) -> ToolDef:
    """The tool, running commands in ``cwd``; ``timeout_s`` is also the longest a call may
    ask for."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "A /bin/sh command line."},
            "timeout_s": {
                "type": "number",
                "description": f"Seconds before it is stopped (default and most: {timeout_s:g}).",
            },
        },
        "required": ["command"],
    }
    description = (
        f"Run a shell command in {cwd or 'the current directory'} (stdin closed) and get its "
        f"combined stdout/stderr (head and tail of at most {output_cap_chars} characters) "
        "and exit code."
    )

    async def handle(context: object, tool_input: dict[str, Any]) -> ToolOutcome:
        wanted = tool_input.get("timeout_s")
        if wanted is not None and wanted <= 0:
            raise InvalidInputError("timeout_s must be a number of seconds > 0")
        limit = min(float(wanted), timeout_s) if wanted is not None else timeout_s
        result = await run_shell(
            tool_input["command"], cwd=cwd, timeout_s=limit, output_cap_chars=output_cap_chars
        )
        return _outcome(result, limit)

    return ToolDef(NAME, description, schema, handle)


def _outcome(result: ShellResult, limit: float) -> ToolOutcome:
    text = result.output if result.output else "(no output)"
    if result.timed_out:
        end = f"[timed out after {limit:g}s; stopped, exit code {result.returncode}]"
        return ToolOutcome(f"{text.rstrip()}\n{end}", ok=False, reason="timeout")
    end = f"[exit code {result.returncode}]"
    ok = result.returncode == 0
    return ToolOutcome(f"{text.rstrip()}\n{end}", ok=ok, reason=None if ok else "exit_code")
