"""The ``shell`` tool: one ``/bin/sh -c`` command with a timeout, its output capped.

Off unless an agent enables it (whoever registers the tool decides; nothing offers it by
default). The command runs in its own process group with stdin closed; stdout and stderr are
read together, in order, keeping the head and the tail when there is too much. On timeout
the whole group gets SIGTERM, then SIGKILL after a grace period. The answer always ends
with the exit code (or the timeout).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scratchpad.errors import InvalidInputError
from scratchpad.tools.base import ToolDef, ToolOutcome

NAME = "shell"
KILL_GRACE_S = 1.0
DRAIN_AFTER_KILL_S = 1.0
READ_CHUNK = 65536


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


async def run_shell(
    command: str, *, cwd: Path | None, timeout_s: float, output_cap_chars: int
) -> ShellResult:
    """Run ``command``; never raises for the command's own failure or a timeout."""
    process = await asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=cwd,
        start_new_session=True,
    )
    assert process.stdout is not None
    output = CappedText(output_cap_chars)
    timed_out = False
    try:
        await asyncio.wait_for(
            asyncio.gather(_pump(process.stdout, output), process.wait()), timeout_s
        )
    except TimeoutError:
        timed_out = True
    finally:
        if process.returncode is None:
            await _stop_group(process)
    if timed_out:
        with contextlib.suppress(TimeoutError):  # what was written before the kill
            await asyncio.wait_for(_pump(process.stdout, output), DRAIN_AFTER_KILL_S)
    output.feed(b"", final=True)
    return ShellResult(output.text(), process.returncode, timed_out)


async def _pump(stream: asyncio.StreamReader, output: CappedText) -> None:
    while chunk := await stream.read(READ_CHUNK):
        output.feed(chunk)


async def _stop_group(process: asyncio.subprocess.Process) -> None:
    """SIGTERM to the command's process group, then SIGKILL if it is still there."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            await asyncio.wait_for(process.wait(), KILL_GRACE_S)
            return
        except TimeoutError:
            continue


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
