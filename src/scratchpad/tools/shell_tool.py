"""The ``shell`` tool: one ``/bin/sh -c`` command with a timeout, its output capped.

Off unless an agent enables it (whoever registers the tool decides; nothing offers it by
default). The command runs in its own process group with stdin closed; stdout and stderr are
read together, in order, keeping the head and the tail when there is too much. When the call
ends (``sh`` exited, timed out, or the call was cancelled) the whole group gets SIGTERM, then
SIGKILL after a grace period, so no background child outlives the call. The answer always
ends with the exit code (or the timeout, when ``sh`` itself was still running).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scratchpad.errors import InvalidInputError
from scratchpad.runtime.procgroup import RunResult, run
from scratchpad.tools.base import ToolDef, ToolOutcome

NAME = "shell"
KILL_GRACE_S = 1.0

ShellResult = RunResult


@dataclass(frozen=True, slots=True)
class ShellOptions:
    """Where the shell tool runs its commands and how far it lets them go; given to
    :func:`scratchpad.tools.builtin.builtin_registry`, whose caller decides to offer it."""

    cwd: Path | None = None
    timeout_s: float = 30.0
    output_cap_chars: int = 10_000


async def run_shell(
    command: str, *, cwd: Path | None, timeout_s: float, output_cap_chars: int
) -> ShellResult:
    """Run ``command``; never raises for the command's own failure or a timeout.

    The call ends when ``sh`` exits (or times out): then whatever is left of its process
    group (background children) is stopped, what was already written is read, and the pipe
    is closed even if a process outside the group still holds it.
    """
    return await run(
        ["/bin/sh", "-c", command],
        timeout=timeout_s,
        cwd=cwd,
        output_cap_chars=output_cap_chars,
        grace=KILL_GRACE_S,
    )


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
