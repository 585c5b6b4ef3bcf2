"""The MCP Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) over detached cells.

A client of the 2026-07-28 revision that declares the extension in a request's capabilities
may get a task instead of a result: its ``scratchpad`` ``exec`` is accepted as a detached
cell (the tool's ``start``), and when the cell has not ended within ``INLINE_S`` the call
answers a ``CreateTaskResult`` (``resultType: "task"``) whose ``taskId`` names that cell.
``tasks/get`` tells how it stands (``working`` with its last progress, then ``completed``
with the very ``CallToolResult`` a plain exec answers, or ``cancelled``), ``tasks/cancel``
cancels the cell, ``tasks/update`` acknowledges (a cell never asks the client for input).
The cell runs whether or not anyone polls: a dropped connection, or another client, finds
it by its task id, which carries the pad's name, so it names the cell after a server
restart too. Every other call, and every client that did not opt in, is served as before.

The SDK's low-level ``Server`` takes no ``Extension`` (only ``MCPServer`` applies them):
:func:`install` registers the methods and advertises the extension the same way.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import (
    Extension,
    MethodBinding,
    RequestHandler,
    compose_tool_call_handler,
)
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from scratchpad.errors import PadNotFoundError, ScratchpadError
from scratchpad.padnames import validate_pad_name
from scratchpad.runtime.base import check_cell_id
from scratchpad.runtime.cell import Cell, new_cell_id
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.scrub import scrub
from scratchpad.text import cut_middle
from scratchpad.tools.base import ToolOutcome, given
from scratchpad.tools.context import ToolSessionContext
from scratchpad.tools.scratchpad_tool import NAME as SCRATCHPAD
from scratchpad.tools.scratchpad_tool import cell_handle, ended_cell
from scratchpad.wire import wire

IDENTIFIER = "io.modelcontextprotocol/tasks"
INLINE_S = 1.0  # a cell that ends this soon is answered as a plain result, not a task
POLL_INTERVAL_MS = 2000
KEPT = 1024  # tasks remembered here (creation time, final result); older ones are found again
STATUS_CHARS = 500
log = logging.getLogger(__name__)

Dispatch = Callable[[str, dict[str, Any], ToolSessionContext], Awaitable[ToolOutcome]]
Answer = Callable[[ToolOutcome], types.CallToolResult]


class TaskParams(types.RequestParams):
    """``{taskId}`` of ``tasks/get``, ``tasks/cancel`` and ``tasks/update``."""

    task_id: str = Field(alias="taskId")


class UpdateTaskParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


@dataclass
class _Task:
    name: str
    cell_id: str
    created_at: str
    updated_at: str
    last_seq: int | None = None
    final: dict[str, Any] | None = None  # the detailed task once it ended (answered once)


def task_id(name: str, cell_id: str) -> str:
    """The task of cell ``cell_id`` of pad ``name``: ``<cell id>.<the name, base64url>``."""
    encoded = base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")
    return f"{cell_id}.{encoded}"


def parse_task_id(value: str) -> tuple[str, str]:
    """The pad name and cell id a task id names; INVALID_PARAMS when it names none."""
    cell_id, _, encoded = value.partition(".")
    try:
        name = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        return validate_pad_name(name), str(check_cell_id(cell_id))
    except (binascii.Error, UnicodeDecodeError, ValueError, ScratchpadError):
        raise MCPError(
            INVALID_PARAMS,
            f"unknown task {cut_middle(scrub(value), 80)!r}: use the taskId a tools/call answered",
        ) from None


def opted_in(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client declared the extension, on a wire that can carry a
    task (a 2026-07-28 request; a handshake-era one cannot)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    return bool(extensions) and IDENTIFIER in (extensions or {})


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TasksExtension(Extension):
    """Long ``scratchpad`` execs as tasks, for clients that opted in."""

    identifier = IDENTIFIER

    def __init__(
        self,
        manager: ScratchpadManager,
        dispatch: Dispatch,
        new_context: Callable[[], ToolSessionContext],
        answer: Answer,
    ) -> None:
        self.manager = manager
        self._dispatch = dispatch
        self._new_context = new_context
        self._answer = answer
        self._tasks: OrderedDict[str, _Task] = OrderedDict()
        self._cancelling: set[asyncio.Task[None]] = set()

    def methods(self) -> Sequence[MethodBinding]:
        versions = frozenset(MODERN_PROTOCOL_VERSIONS)
        return (
            MethodBinding("tasks/get", TaskParams, self.get, versions),
            MethodBinding("tasks/update", UpdateTaskParams, self.update, versions),
            MethodBinding("tasks/cancel", TaskParams, self.cancel, versions),
        )

    async def intercept_tool_call(
        self,
        params: types.CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        arguments = given(params.arguments or {})
        if params.name != SCRATCHPAD or arguments.get("action", "exec") != "exec":
            return await call_next(ctx)
        if not opted_in(ctx):
            return await call_next(ctx)
        cell_id = arguments.get("cell_id") or new_cell_id()
        started = {**arguments, "action": "start", "cell_id": cell_id}
        name = str(arguments.get("name"))
        try:
            outcome = await self._dispatch(SCRATCHPAD, started, self._new_context())
            if not outcome.ok:  # refused before it ran: exec's own answer
                return self._answer(outcome)
            handle = await cell_handle(self.manager, name, cell_id)
            ended = await handle.wait(INLINE_S)
        except asyncio.CancelledError:  # the client gave up before it knew of a task
            self._cancel_soon(name, cell_id)
            raise
        now = _now()
        task = self._keep(task_id(name, cell_id), _Task(name, cell_id, now, now))
        if ended is not None:  # a short cell: the plain result
            return self._answer(ended_cell(self._new_context(), name, ended))
        return {"resultType": "task", **await self._detailed(task)}

    # -- the methods -----------------------------------------------------------------------
    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        """The task as it stands (with its result once the cell ended)."""
        return await self._detailed(self._task(ctx, params.task_id))

    async def update(
        self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams
    ) -> dict[str, Any]:
        """An empty acknowledgement: a cell never waits for input, so no key is outstanding
        (the spec's rule: responses to keys not outstanding are ignored)."""
        task = self._task(ctx, params.task_id)
        await self._look(task)  # an unknown task is an error, as for get
        return {}

    async def cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        """Cancel the task's cell (queued: never runs; running: interrupted, variables
        kept); the acknowledgement is empty, the cell's end shows in ``tasks/get``."""
        task = self._task(ctx, params.task_id)
        await self._look(task)
        try:
            await self.manager.cancel(task.name, task.cell_id)
        except ScratchpadError as exc:
            raise MCPError(INTERNAL_ERROR, scrub(str(exc))) from None
        return {}

    # -- helpers ---------------------------------------------------------------------------
    def _cancel_soon(self, name: str, cell_id: str) -> None:
        """Cancel a cell whose caller went away (from a task of its own: the caller's is
        being cancelled), as a plain exec's cell is."""

        async def cancel() -> None:
            try:
                await self.manager.cancel(name, cell_id)
            except ScratchpadError as exc:
                log.warning("could not cancel cell %s of pad %r: %s", cell_id, name, exc)

        task = asyncio.get_running_loop().create_task(cancel())
        self._cancelling.add(task)
        task.add_done_callback(self._cancelling.discard)

    def _task(self, ctx: ServerRequestContext[Any, Any], value: str) -> _Task:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            raise MCPError(METHOD_NOT_FOUND, "Method not found")
        known = self._tasks.get(value)
        if known is not None:
            return known
        name, cell_id = parse_task_id(value)  # a task of an earlier connection or server:
        now = _now()  # remembered once its cell is found (_detailed)
        return _Task(name, cell_id, now, now)

    def _keep(self, key: str, task: _Task) -> _Task:
        """Remember ``task`` under ``key`` (the one already remembered, if any)."""
        kept = self._tasks.setdefault(key, task)
        while len(self._tasks) > KEPT:
            self._tasks.popitem(last=False)
        return kept

    async def _look(self, task: _Task) -> Cell | dict[str, Any]:
        """The task's cell as it stands; INVALID_PARAMS when there is no such cell."""
        try:
            standing = await (await cell_handle(self.manager, task.name, task.cell_id)).peek()
        except PadNotFoundError as exc:
            raise MCPError(
                INVALID_PARAMS, f"unknown task: {scrub(str(exc))} (a reset forgets its cells)"
            ) from None
        except ScratchpadError as exc:
            raise MCPError(INTERNAL_ERROR, scrub(str(exc))) from None
        return standing if isinstance(standing, Cell) else wire(standing)

    async def _detailed(self, task: _Task) -> dict[str, Any]:
        """The spec's ``DetailedTask``: working, completed (with the result) or cancelled."""
        if task.final is not None:
            return task.final
        standing = await self._look(task)
        key = task_id(task.name, task.cell_id)
        task = self._keep(key, task)
        common = {"taskId": key, "createdAt": task.created_at, "ttlMs": None}
        if isinstance(standing, Cell):
            task.updated_at = _now()
            final: dict[str, Any] = {**common, "lastUpdatedAt": task.updated_at}
            if standing.status == "cancelled":
                message = cut_middle(scrub(standing.error or "cancelled"), STATUS_CHARS)
                final |= {"status": "cancelled", "statusMessage": message.strip()}
            else:  # an error in the code is a result too (isError), as the spec says
                outcome = await asyncio.to_thread(
                    ended_cell, self._new_context(), task.name, standing
                )
                result = self._answer(outcome)
                dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
                final |= {"status": "completed", "result": dumped}
            task.final = final
            return final
        seq = standing.get("last_seq")
        if seq != task.last_seq:
            task.last_seq, task.updated_at = seq, _now()
        return {
            **common,
            "status": "working",
            "statusMessage": _status_message(standing),
            "lastUpdatedAt": task.updated_at,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }


def _status_message(standing: dict[str, Any]) -> str:
    """``queued`` or ``running (N s)``, and the cell's last progress message."""
    status = str(standing.get("status", "running"))
    started = standing.get("started_at")
    if isinstance(started, int | float):
        status += f" ({time.time() - started:.0f} s)"
    progress = standing.get("progress")
    if progress:
        status += f": {progress}"
    return cut_middle(scrub(status), STATUS_CHARS)


def install(server: Server[Any], extension: Extension, call_tool: RequestHandler) -> None:
    """Serve ``extension``'s methods on the low-level ``server``, advertise it, and wrap its
    interceptor around ``call_tool`` (what ``MCPServer`` does for its extensions)."""
    for method in extension.methods():
        server.add_request_handler(method.method, method.params_type, method.handler)
    server.extensions[extension.identifier] = extension.settings()
    wrapped = compose_tool_call_handler([extension], call_tool)
    server.add_request_handler("tools/call", types.CallToolRequestParams, wrapped)
