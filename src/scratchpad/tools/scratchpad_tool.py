"""The ``scratchpad`` tool: the model's persistent Python notebooks.

Actions: exec (run code, installing ``packages`` first), view, dump, reset, remove, install.
Observers fire around every cell here, in the tool, never in the runtime.
"""

from __future__ import annotations

from typing import Any

from scratchpad.runtime.cell import Cell, OutputEvent, ProgressEvent, StreamItem
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.names import validate_pad_name
from scratchpad.tools.base import ToolDef, ToolOutcome
from scratchpad.tools.cell_result import cell_outcome
from scratchpad.tools.context import ToolSessionContext

NAME = "scratchpad"
ACTIONS = ["exec", "view", "dump", "reset", "remove", "install"]
EMPTY_CODE = (
    "No code received: the `code` field was empty, so the payload was probably cut off. "
    "Send the call again with the complete code."
)

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ACTIONS, "description": "What to do (exec)."},
        "name": {"type": "string", "description": "Pad name, e.g. 'main'."},
        "code": {"type": "string", "description": "Python code to run (exec)."},
        "packages": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Packages to install (install; with exec: before the code runs).",
        },
        "one_line_description": {"type": "string", "description": "What this cell does."},
        "estimated_execution_time_seconds": {
            "type": "number",
            "description": "Your estimate; timeouts follow it (about twice as long).",
        },
        "timeout_s": {
            "type": "number",
            "description": "A hard limit in seconds for this cell (exec); it may be short.",
        },
        "confirm_new_scratchpad": {
            "type": "boolean",
            "description": "Set true to start a second pad name in this session on purpose.",
        },
    },
    "required": ["action", "name"],
}


def describe(notable_packages: list[str], credentials: str = "") -> str:
    """The tool's description; ``credentials`` is the vault's sentence of variable names."""
    packages = ", ".join(notable_packages) or "none beyond the standard library"
    return (
        "Run Python in a persistent pad (a notebook whose variables survive between calls). "
        "exec runs `code` and returns its output, the value of its last expression, errors "
        "and plots; view shows the pad's cells; dump gives them as markdown; reset clears "
        "the variables (packages stay); remove deletes the pad; install adds `packages`. "
        "Inside a cell: progress(msg) for long work, display(obj) for rich output, "
        "sample(value) for a quick look at data. Large output is saved as an observation "
        f"you can read with read_observation. Notable installed packages: {packages}."
        f"{credentials}"
    )


def current_description(manager: ScratchpadManager) -> str:
    """The description as of now: the vault's connections may have changed since the tool
    was made (an MCP server lists its tools again and again)."""
    return describe(manager.probe_packages(), manager.describe_credentials())


def scratchpad_tool(manager: ScratchpadManager) -> ToolDef:
    return ToolDef(NAME, current_description(manager), INPUT_SCHEMA, handle_scratchpad)


async def handle_scratchpad(context: ToolSessionContext, tool_input: dict[str, Any]) -> Any:
    action = tool_input.get("action", "exec")
    name = validate_pad_name(tool_input.get("name", "main"))
    manager = context.manager
    if action == "exec":
        return await _exec(context, name, tool_input)
    if action == "remove":
        await manager.remove(name)
        return f"Pad {name!r} removed (its environment and packages are gone)."
    pad = await manager.get_or_create(name)
    if action == "view":
        return pad.view()
    if action == "dump":
        return pad.dump()
    if action == "reset":
        await pad.reset()
        context.emit("scratchpad_reset", pad=name)
        return f"Pad {name!r} reset: variables cleared, installed packages kept."
    packages = tool_input.get("packages") or []
    output = await pad.install_packages(packages)
    return f"Installed into {name!r}:\n{output or 'nothing to do'}"


async def _exec(context: ToolSessionContext, name: str, tool_input: dict[str, Any]) -> Any:
    code = tool_input.get("code") or ""
    if not code.strip():
        context.emit("scratchpad_empty_code", pad=name)
        return ToolOutcome(EMPTY_CODE, ok=False, reason="empty_code")
    question = _second_pad_question(context, name, bool(tool_input.get("confirm_new_scratchpad")))
    if question:
        return ToolOutcome(question, ok=False, reason="confirm_new_scratchpad")
    pad = await context.manager.get_or_create(name)
    if name not in context.pads_used:
        context.pads_used.append(name)
    packages = tool_input.get("packages") or []
    if packages:
        await pad.install_packages(packages)
    description = str(tool_input.get("one_line_description") or "")
    estimate = tool_input.get("estimated_execution_time_seconds") or 0
    timeout_s = tool_input.get("timeout_s")
    context.emit("scratchpad_call", pad=name, code=code, description=description)
    context.notify("before_cell", name, _preview(code, description))
    try:
        cell = await pad.execute(
            code,
            description=description,
            estimated_seconds=estimate,
            timeout_s=timeout_s,
            on_event=lambda item: _forward(context, item),
        )
    except BaseException as exc:  # observers and subscribers always see the cell end
        failed = Cell(code=code, description=description, status="error", error=str(exc))
        context.notify("after_cell", name, failed)
        context.emit("scratchpad_result", pad=name, status="error", cell_id=failed.id)
        raise
    context.notify("after_cell", name, cell)
    event = "scratchpad_killed" if cell.status == "killed" else "scratchpad_result"
    context.emit(event, pad=name, status=cell.status, cell_id=cell.id)
    return cell_outcome(cell, name, context)


def _second_pad_question(context: ToolSessionContext, name: str, confirmed: bool) -> str:
    """Ask once before a session opens a second pad name (a typo loses all variables)."""
    if confirmed or not context.pads_used or name in context.pads_used:
        return ""
    if name in context.asked_new_pad or name in context.manager.names():
        return ""
    context.asked_new_pad.add(name)
    used = ", ".join(repr(p) for p in context.pads_used)
    return (
        f"This session already uses the pad {used}. A new pad {name!r} starts empty: none of "
        f"the variables of {used} exist there. To use the existing pad, call again with its "
        f"name; to really start {name!r}, call again with confirm_new_scratchpad=true."
    )


def _forward(context: ToolSessionContext, item: StreamItem) -> None:
    if isinstance(item, ProgressEvent):
        context.progress(item.message)
    elif isinstance(item, OutputEvent):
        context.progress(item.text.rstrip("\n")[-200:])


def _preview(code: str, description: str) -> Cell:
    """The cell as observers see it before it runs."""
    return Cell(code=code, description=description)
