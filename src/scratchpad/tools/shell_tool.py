"""The ``shell`` tool: one ``/bin/sh -c`` command with a timeout, confined like a pad's
process, its output scrubbed and capped.

Off unless an agent enables it (whoever registers the tool decides; nothing offers it by
default). The command runs through the pads' launcher (``launcher.run_confined``): in its
workspace, with the home and the ``guarded`` directories (an agent's own files) out of reach,
the pads' allowlisted environment (no key of the server's), a temp directory of its own and
the pads' limits; in a PID namespace of its own where the system has them. stdin is closed;
stdout and stderr are read together, in order, through the scrubber, keeping the head and
the tail when there is too much. When the call ends (``sh`` exited, timed out, or the call
was cancelled) everything it started is stopped, so no background child outlives the call.
The answer always ends with the exit code (or the timeout, when ``sh`` itself was still
running).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError
from scratchpad.runtime.launcher import run_confined
from scratchpad.runtime.procgroup import RunResult
from scratchpad.scrub import scrubber
from scratchpad.tools.base import ToolDef, ToolOutcome

NAME = "shell"
KILL_GRACE_S = 1.0

ShellResult = RunResult


@dataclass(frozen=True, slots=True)
class ShellOptions:
    """Where the shell tool runs its commands and how far it lets them go; given to
    :func:`scratchpad.tools.builtin.builtin_registry`, whose caller decides to offer it.
    ``settings`` say how pads are confined here (sandbox, identity, limits) and whose home
    is out of reach; ``guarded`` directories are kept out like the home."""

    workspace: Path
    settings: Settings
    guarded: tuple[Path, ...] = ()
    timeout_s: float = 30.0
    output_cap_chars: int = 10_000


async def run_shell(command: str, options: ShellOptions, *, timeout_s: float) -> ShellResult:
    """Run ``command``; never raises for the command's own failure or a timeout.

    The call ends when ``sh`` exits (or times out): then whatever it left running is
    stopped, what was already written is read, and the pipe is closed even if a process
    still holds it. OSError when the launcher itself cannot be started.
    """
    return await run_confined(
        options.settings,
        ["/bin/sh", "-c", command],
        workspace=options.workspace,
        guarded=options.guarded,
        timeout=timeout_s,
        output_cap_chars=options.output_cap_chars,
        grace=KILL_GRACE_S,
        through=scrubber().stream(),
    )


def shell_tool(options: ShellOptions) -> ToolDef:
    """The tool, running commands in ``options.workspace``; ``options.timeout_s`` is also the
    longest a call may ask for."""
    timeout_s = options.timeout_s
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
        f"Run a shell command in {options.workspace} (stdin closed; sandboxed like a pad: "
        "files outside that directory are read-only or hidden) and get its combined "
        f"stdout/stderr (head and tail of at most {options.output_cap_chars} characters) and "
        "exit code."
    )

    async def handle(context: object, tool_input: dict[str, Any]) -> ToolOutcome:
        wanted = tool_input.get("timeout_s")
        if wanted is not None and wanted <= 0:
            raise InvalidInputError("timeout_s must be a number of seconds > 0")
        limit = min(float(wanted), timeout_s) if wanted is not None else timeout_s
        result = await run_shell(tool_input["command"], options, timeout_s=limit)
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
