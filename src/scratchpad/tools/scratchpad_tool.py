"""The ``scratchpad`` tool: the model's persistent Python notebooks.

Actions: exec (run code, installing ``packages`` first), view, dump, list, reset, remove,
install, cancel, revert (undo the last cell's effect on the variables), fork (copy a pad);
start, peek and wait for a cell that runs whether or not the call waits (a detached cell,
accepted as ``POST /v1/pads/{name}/cells`` accepts one). Observers fire around every cell run
by exec, in the tool, never in the runtime.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import replace
from typing import Any, NoReturn

from scratchpad.errors import InvalidInputError, PadNotFoundError, ScratchpadError
from scratchpad.events import RESOURCES_SCHEMA
from scratchpad.padnames import MAX_NAME_CHARS, validate_pad_name
from scratchpad.runtime.accepts import submit
from scratchpad.runtime.base import CellRequest, ScratchpadRuntime, check_cell_id
from scratchpad.runtime.cell import Cell, OutputEvent, ProgressEvent, StreamItem, new_cell_id
from scratchpad.runtime.handle import CellHandle
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.padinfo import PadInfo, last_active
from scratchpad.runtime.timeouts import check_estimate, check_timeout, name_parameters
from scratchpad.scrub import scrub
from scratchpad.text import cut_middle
from scratchpad.tools.base import ToolDef, ToolHints, ToolOutcome, given
from scratchpad.tools.cell_result import cell_outcome
from scratchpad.tools.context import ToolSessionContext
from scratchpad.wire import wire

# How this tool names a cell's time limits (a stopped cell's advice names them).
PARAMETERS = {"timeout": "timeout_s", "estimate": "estimated_execution_time_seconds"}

log = logging.getLogger(__name__)

NAME = "scratchpad"
TITLE = "Python scratchpad"
ACTIONS = ["exec", "view", "dump", "list", "reset", "remove", "install", "cancel"]
ACTIONS += ["revert", "fork"]
ACTIONS += ["start", "peek", "wait"]  # detached cells
CELL_ACTIONS = ("peek", "wait")  # a look at cell `cell_id`
WAIT_MAX_S = 30.0  # one wait call waits at most this long; the model asks again
WAIT_DEFAULT_S = 10.0
SO_FAR_CHARS = 8000  # per stream of a running cell's output shown by peek and wait
NAMED_ACTIONS = [action for action in ACTIONS if action != "list"]
# The tool as a whole: exec runs any code (the network included), reset and remove lose state.
HINTS = ToolHints(read_only=False, destructive=True, idempotent=False, open_world=True)
EMPTY_CODE = (
    "No code received: the `code` field was empty, so the payload was probably cut off. "
    "Send the call again with the complete code."
)
ACTION_HELP = (
    "What to do. exec: run `code` in pad `name` (created if new) and get its output, the "
    "value of its last expression, errors and plots. view: the pad's cells as text. dump: its "
    "cells as notebook markdown. list: every pad with its status (busy, idle, asleep: starts "
    "again on its next use, stopped) and number of cells; needs no name. reset: clear the "
    "pad's variables (packages stay). "
    "remove: delete the pad, its variables and packages. install: add `packages` to the pad. "
    "cancel: stop the pad's running cell (variables kept), or the queued or running cell "
    "`cell_id`. start: like exec, but answers at once with the cell's id and status while "
    "the cell runs on (for long work: no client timeout applies); then peek: how cell "
    "`cell_id` stands (its output so far, or its result once it ended), wait: the same after "
    f"waiting up to `wait_s` seconds (at most {WAIT_MAX_S:g}) for it to end. "
    "Read-only: view, dump, list, peek, wait. Destructive: reset, remove (cancel interrupts). "
    "revert: put the pad's variables back as they were before its last cell that changed "
    "them (again: one more step back). fork: copy the pad (packages, variables, cells) into "
    "the new pad `to`, to try two approaches side by side."
)
NAME_HELP = (
    f"Pad name, e.g. 'main': any non-empty text of up to {MAX_NAME_CHARS} characters without "
    "control characters. Variables live per name. Every action but list needs one."
)
TIMEOUT_HELP = (
    "exec: a cell may run about twice this estimate (at least estimate + 30 s; 120 s when "
    "there is no estimate; never over the server's maximum, 3600 s by default). Quiet work is "
    "fine: only a kernel with no sign of life (no output, no heartbeat) for 30-60 s counts as "
    "hung."
)

RESOURCES_HELP = (
    "exec, start: what the pad asks its Ray cluster for when it starts (servers run with "
    'SCRATCHPAD_BACKEND=ray only; others refuse it), e.g. {"cpus": 2, "memory_mb": 4096} '
    'or {"gpus": 1}; a running pad keeps its place until it starts again. Leave it out '
    "otherwise."
)

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ACTIONS, "description": ACTION_HELP},
        "name": {
            "type": "string",
            "maxLength": MAX_NAME_CHARS,
            "description": NAME_HELP,
        },
        "code": {"type": "string", "description": "Python code to run (exec)."},
        "packages": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Packages to install (install; with exec: before the code runs).",
        },
        "one_line_description": {"type": "string", "description": "What this cell does."},
        "estimated_execution_time_seconds": {
            "type": "number",
            "minimum": 0,
            "description": TIMEOUT_HELP,
        },
        "timeout_s": {
            "type": "number",
            "minimum": 0,
            "description": "exec: a hard limit in seconds for this cell, used instead of the "
            "estimate's (it may be short; at most the server's maximum); 0: none.",
        },
        "cell_id": {
            "type": "string",
            "description": "exec, start: an id for this cell (1-64 letters, digits, '_' or "
            "'-'), so another call can cancel it; start: a retried start with the same id and "
            "code is that cell (never run twice); cancel, peek, wait: the cell.",
        },
        "wait_s": {
            "type": "number",
            "minimum": 0,
            "description": f"wait: seconds to wait for the cell to end (default "
            f"{WAIT_DEFAULT_S:g}, at most {WAIT_MAX_S:g}).",
        },
        "to": {
            "type": "string",
            "maxLength": MAX_NAME_CHARS,
            "description": "fork: the new pad's name (it must not exist).",
        },
        "resources": {**RESOURCES_SCHEMA, "description": RESOURCES_HELP},
        "confirm_new_scratchpad": {
            "type": "boolean",
            "description": "Set true to start a second pad name in this session on purpose.",
        },
    },
    "required": ["action"],
    # every action but list needs a pad (an if/then: clients refuse oneOf at the top level)
    "if": {"properties": {"action": {"enum": NAMED_ACTIONS}}, "required": ["action"]},
    "then": {"required": ["name"]},
}


def describe(notable_packages: list[str], credentials: str = "") -> str:
    """The tool's description; ``credentials`` is the vault's sentence of variable names."""
    packages = ", ".join(notable_packages) or "none beyond the standard library"
    return (
        "Run Python in a persistent pad (a notebook whose variables survive between calls). "
        "exec runs `code` and returns its output, the value of its last expression, errors "
        "and plots; view shows the pad's cells; dump gives them as markdown; list shows every "
        "pad and whether it is busy; reset clears the variables (packages stay); remove "
        "deletes the pad; install adds `packages`; cancel stops a running cell. "
        "Inside a cell: progress(msg) for long work, display(obj) for rich output, "
        "sample(value) for a quick look at data. A call lasts as long as its cell: clients "
        "need a timeout longer than their longest cell (given a progress token, progress "
        "comes at least every 10 s); for longer work, start runs a cell without waiting and "
        "peek or wait (with its cell_id) follow it. Large output is saved as an observation "
        f"you can read with read_observation. Notable installed packages: {packages}."
        f"{credentials}"
    )


def current_description(manager: ScratchpadManager) -> str:
    """The description as of now: the vault's connections may have changed since the tool
    was made (an MCP server lists its tools again and again)."""
    return describe(manager.probe_packages(), manager.describe_credentials())


def scratchpad_tool(manager: ScratchpadManager) -> ToolDef:
    """The ``scratchpad`` tool over ``manager``'s pads (exec, view, dump, install, ...)."""
    return ToolDef(
        NAME,
        current_description(manager),
        INPUT_SCHEMA,
        handle_scratchpad,
        title=TITLE,
        hints=HINTS,
    )


async def handle_scratchpad(context: ToolSessionContext, tool_input: dict[str, Any]) -> Any:
    tool_input = given(tool_input)
    action = tool_input.get("action", "exec")
    manager = context.manager
    if action == "list":
        return pad_list(await manager.list_pads())
    if "name" not in tool_input:
        raise InvalidInputError(
            f"missing required field 'name': action {action!r} needs a pad name, e.g. "
            '"main" (every action but list needs one)'
        )
    name = validate_pad_name(tool_input["name"])
    if action == "exec":
        return await _exec(context, name, tool_input)
    if action == "cancel":
        return await _cancel(manager, name, tool_input.get("cell_id"))
    if action in ("revert", "fork"):
        return await _revert_or_fork(manager, name, action, tool_input.get("to"))
    if action == "start":
        return await _start(context, name, tool_input)
    if action in CELL_ACTIONS:
        return await _look(context, name, action, tool_input)
    if action == "remove":
        await manager.remove(name)
        return f"Pad {name!r} removed (its environment and packages are gone)."
    if action in ("view", "dump", "reset") and not await manager.has_pad(name):
        _absent(name, action)  # a look, or a typo, starts no pad
    pad = await manager.get_or_create(name)
    if action in ("view", "dump"):
        await pad.load_cells()  # where the pad keeps them (a pad server's: every client's)
        return pad.view() if action == "view" else pad.dump()
    if action == "reset":
        await pad.reset()
        context.emit("scratchpad_reset", pad=name)
        return f"Pad {name!r} reset: variables cleared, installed packages kept."
    packages = tool_input.get("packages") or []
    output = await pad.install_packages(packages)
    return f"Installed into {name!r}:\n{output or 'nothing to do'}"


async def _revert_or_fork(manager: ScratchpadManager, name: str, action: str, to: object) -> str:
    if action == "revert":
        back = await manager.revert(name)
        return (
            f"Pad {name!r} reverted: its variables are as they were after cell {back} (the "
            "cells after it stay in its history). The next cell's logs list what was restored."
        )
    if not isinstance(to, str) or not to:
        raise InvalidInputError('fork needs `to`: the name of the new pad, e.g. "main-2"')
    info = await manager.fork(name, to)
    return (
        f"Pad {name!r} forked into {info.name!r} ({info.cells} cells, asleep): its packages, "
        "cells and saved variables were copied; its first cell restores them (its logs say "
        f"which). {name!r} is unchanged."
    )


def _absent(name: str, action: str) -> NoReturn:
    """View, dump or reset of a pad that does not exist: an error, as in the CLI (none made)."""
    if action == "reset":
        raise PadNotFoundError(f"no pad named {name!r}; there is nothing to reset")
    raise PadNotFoundError(f"no pad named {name!r}; create it by running a cell in it (exec)")


def _asked(
    context: ToolSessionContext, name: str, tool_input: dict[str, Any]
) -> CellRequest | ToolOutcome:
    """The cell exec or start was asked to run, checked (or the answer that refuses it)."""
    code = tool_input.get("code") or ""
    if not code.strip():
        context.emit("scratchpad_empty_code", pad=name)
        return ToolOutcome(EMPTY_CODE, ok=False, reason="empty_code")
    estimate = check_estimate(tool_input.get("estimated_execution_time_seconds") or 0,
                              name="estimated_execution_time_seconds")  # fmt: skip
    timeout_s = tool_input.get("timeout_s")
    if timeout_s is not None:  # its upper limit is the runtime's (a remote one: its server's)
        timeout_s = check_timeout(timeout_s)
    cell_id = check_cell_id(tool_input.get("cell_id")) or new_cell_id()  # to interrupt it
    question = _second_pad_question(context, name, bool(tool_input.get("confirm_new_scratchpad")))
    if question:
        return ToolOutcome(question, ok=False, reason="confirm_new_scratchpad")
    description = str(tool_input.get("one_line_description") or "")
    return CellRequest(code, description, "", estimate, cell_id, timeout_s)


async def _prepared(
    context: ToolSessionContext, name: str, tool_input: dict[str, Any]
) -> ScratchpadRuntime:
    """The pad, started (placed as ``resources`` asks), with the asked ``packages``
    installed."""
    pad = await context.manager.get_or_create(name, resources=tool_input.get("resources"))
    if name not in context.pads_used:
        context.pads_used.append(name)
    packages = tool_input.get("packages") or []
    if packages:
        await pad.install_packages(packages)
    return pad


async def _exec(context: ToolSessionContext, name: str, tool_input: dict[str, Any]) -> Any:
    asked = _asked(context, name, tool_input)
    if isinstance(asked, ToolOutcome):
        return asked
    code, description, cell_id = asked.code, asked.description, str(asked.cell_id)
    pad = await _prepared(context, name, tool_input)
    context.emit("scratchpad_call", pad=name, code=code, description=description)
    context.notify("before_cell", name, _preview(code, description))
    try:
        cell = await pad.execute(
            code,
            description=description,
            estimated_seconds=asked.estimated_seconds,
            timeout_s=asked.timeout_s,
            cell_id=cell_id,
            on_event=lambda item: _forward(context, item),
        )
    except BaseException as exc:  # observers and subscribers always see the cell end
        if isinstance(exc, asyncio.CancelledError):  # the caller gave up: so does the cell
            _interrupt(pad, cell_id)
        failed = Cell(code=code, description=description, status="error", error=str(exc))
        context.notify("after_cell", name, failed)
        context.emit("scratchpad_result", pad=name, status="error", cell_id=failed.id)
        raise
    context.notify("after_cell", name, cell)
    event = "scratchpad_killed" if cell.status == "killed" else "scratchpad_result"
    context.emit(event, pad=name, status=cell.status, cell_id=cell.id)
    return ended_cell(context, name, cell)


def ended_cell(context: ToolSessionContext, name: str, cell: Cell) -> ToolOutcome:
    """A cell that ended as the model reads it: exec's answer, and peek's or wait's (or a
    task's result) for a cell another call started."""
    if cell.error:  # the stopped cell's advice in this tool's own words
        cell = replace(cell, error=name_parameters(cell.error, PARAMETERS))
    return cell_outcome(cell, name, context)


# -- detached cells: start, then peek, wait or cancel ----------------------------------------
async def _start(context: ToolSessionContext, name: str, tool_input: dict[str, Any]) -> Any:
    """Accept a cell that runs whether or not anyone waits (the rules of ``POST
    /v1/pads/{name}/cells``: a retry of its id with the same code is that cell, with other
    code refused) and answer its id and status at once."""
    asked = _asked(context, name, tool_input)
    if isinstance(asked, ToolOutcome):
        return asked
    pad = await _prepared(context, name, tool_input)
    if context.manager.backend.keeps_files:
        cell_id = (await submit(context.manager, name, asked, asked.timeout_s)).id
    else:  # a pad server's pad: its server accepts it the same way
        handle = await pad.start_cell(
            asked.code, description=asked.description,
            estimated_seconds=asked.estimated_seconds, timeout_s=asked.timeout_s,
            cell_id=asked.cell_id,
        )  # fmt: skip
        cell_id = handle.id
    context.emit("scratchpad_started", pad=name, cell_id=cell_id)
    standing = await (await cell_handle(context.manager, name, cell_id)).peek()
    started = json.dumps({"id": cell_id, "status": standing.status})
    return (
        f"{started}\nCell {cell_id!r} of pad {name!r} runs on its own. Follow it with action "
        f"wait (or peek) and cell_id {cell_id!r}; cancel stops it."
    )


async def _look(
    context: ToolSessionContext, name: str, action: str, tool_input: dict[str, Any]
) -> ToolOutcome:
    """peek (how cell ``cell_id`` stands) or wait (the same once it ended, or after
    ``wait_s`` seconds): the ended cell as exec answers it, else its output so far."""
    if not tool_input.get("cell_id"):
        raise InvalidInputError(
            f"missing required field 'cell_id': action {action!r} needs the id of a cell "
            "(the one start answered, or one exec was given)"
        )
    cell_id = str(check_cell_id(tool_input["cell_id"]))
    wait_s = _wait_seconds(tool_input.get("wait_s")) if action == "wait" else 0.0
    handle = await cell_handle(context.manager, name, cell_id)
    if wait_s:
        await handle.wait(wait_s)
    standing = await handle.peek()
    if isinstance(standing, Cell):
        return ended_cell(context, name, standing)
    return ToolOutcome(so_far(name, wire(standing)))


async def cell_handle(manager: ScratchpadManager, name: str, cell_id: str) -> CellHandle:
    """A handle on cell ``cell_id`` of pad ``name``; a look wakes no local pad."""
    if manager.backend.keeps_files:
        if not await manager.has_pad(name):
            _absent(name, "peek")
        return await manager.peek(name).cell(cell_id)
    pad = await manager.get_or_create(name)  # a pad server's: its handle follows the cell
    known = _following.get((name, cell_id))
    if known is not None and known.pad is pad:
        return known  # one follower per cell, however often it is looked at
    handle = await pad.cell(cell_id)
    for key, followed in list(_following.items()):
        if followed.journal.terminal is not None:
            del _following[key]
    if handle.journal.terminal is None and len(_following) < FOLLOWED_MAX:
        _following[(name, cell_id)] = handle
    return handle


_following: dict[tuple[str, str], CellHandle] = {}  # running cells of a pad server, followed
FOLLOWED_MAX = 256


def _wait_seconds(value: object) -> float:
    """How long a wait call waits: ``wait_s`` checked, at most WAIT_MAX_S."""
    if value is None:
        return WAIT_DEFAULT_S
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise InvalidInputError(
            f"wait_s must be a number of seconds from 0 to {WAIT_MAX_S:g}, not {value!r}"
        )
    return min(float(value), WAIT_MAX_S)


def so_far(name: str, standing: dict[str, Any]) -> str:
    """A cell that has not ended, as the model reads it: its status and output so far
    (scrubbed, each stream cut to head and tail)."""
    cell_id = standing.get("id", "")
    started = standing.get("started_at")
    since = f" ({time.time() - started:.0f} s so far)" if isinstance(started, int | float) else ""
    lines = [f"Cell {cell_id!r} of pad {name!r} is {standing.get('status', 'running')}{since}."]
    if progress := standing.get("progress"):
        lines.append(f"[progress]\n{cut_middle(scrub(str(progress)), 500)}")
    for stream in ("stdout", "stderr"):
        if text := standing.get(stream):
            lines.append(f"[{stream} so far]\n{cut_middle(scrub(str(text)), SO_FAR_CHARS)}")
    shown = len(standing.get("displays") or []) + int(standing.get("displays_dropped") or 0)
    if shown:
        lines.append(f"[displays] {shown} so far (shown when the cell ends)")
    lines.append(
        f"It runs on: wait (up to {WAIT_MAX_S:g} s a call) or peek again with cell_id "
        f"{cell_id!r}; cancel stops it."
    )
    return "\n".join(lines)


def pad_list(pads: list[PadInfo]) -> str:
    """The pads as the model reads them: one line each."""
    if not pads:
        return "No pads yet: exec creates one."
    lines = [f"{len(pads)} pad(s):"]
    for info in pads:
        queued = f", {info.queued} queued" if info.queued else ""
        asleep = info.status == "asleep"
        rest = f", {last_active(info.last_activity, time.time())}" if asleep else ""
        lines.append(f"- {info.name!r}: {info.status}, {info.cells} cell(s){queued}{rest}")
    return "\n".join(lines)


async def _cancel(manager: ScratchpadManager, name: str, cell_id: object) -> ToolOutcome:
    """Cancel a cell by id, or the pad's running one; never starts a pad."""
    checked = check_cell_id(cell_id)
    if checked is None and not await manager.has_pad(name):
        raise PadNotFoundError(f"no pad named {name!r}; there is nothing to cancel")
    if await manager.cancel(name, checked):
        what = f"cell {checked!r}" if checked else "the running cell"
        return ToolOutcome(f"Cancelled {what} of pad {name!r} (its variables are kept).")
    if checked is None:
        return ToolOutcome(f"Nothing to cancel: pad {name!r} runs no cell.", ok=False,
                           reason="nothing_to_cancel")  # fmt: skip
    return ToolOutcome(
        f"Nothing to cancel: pad {name!r} has no queued or running cell {checked!r} (it may "
        "have finished).",
        ok=False,
        reason="nothing_to_cancel",
    )


_interrupts: set[asyncio.Task[None]] = set()


def _interrupt(pad: ScratchpadRuntime, cell_id: str) -> None:
    """Cancel a cell whose caller went away (an MCP client's cancel or timeout, a stopped
    agent loop), as a dropped remote-protocol stream does: interrupted, variables kept. From
    a task of its own: the caller's task is being cancelled."""

    async def cancel() -> None:
        try:
            await pad.cancel(cell_id)
        except ScratchpadError as exc:  # e.g. the pad server went away meanwhile
            log.warning("could not interrupt cell %s of pad %r: %s", cell_id, pad.name, exc)

    task = asyncio.get_running_loop().create_task(cancel())
    _interrupts.add(task)
    task.add_done_callback(_interrupts.discard)


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
