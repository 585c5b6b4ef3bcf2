"""The MCP server: the ``scratchpad`` and ``read_observation`` tools over the Model Context
Protocol, through the official SDK's low-level server so MCP clients see the very schemas and
answers the tool registry gives our own agent loop.

Calls run through :class:`ToolRegistry` dispatch, so bad input and tool failures come back as
error results the model can read. MCP calls carry no conversation, so each call gets a fresh
tool context (the agent loop's one-time question before a second pad name is not asked); large
outputs are saved under one turn id, ``mcp``, so a later call can read them back. A client
that opts into the Tasks extension gets a long exec as a task (:mod:`.mcp_tasks`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager

from scratchpad import __version__
from scratchpad.connect.pending import PendingForms
from scratchpad.llm.messages import ImageBlock, TextBlock
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.scrub import scrub
from scratchpad.server import mcp_credentials
from scratchpad.server.mcp_tasks import TasksExtension, install
from scratchpad.tools.base import ToolDef, ToolOutcome
from scratchpad.tools.builtin import builtin_registry
from scratchpad.tools.context import ToolSessionContext
from scratchpad.tools.scratchpad_tool import NAME as SCRATCHPAD
from scratchpad.tools.scratchpad_tool import current_description

SERVER_NAME = "scratchpad"
TURN_ID = "mcp"
KEEPALIVE_S = 5.0  # the longest quiet stretch of a call with a progress token (clients: 10 s)
INSTRUCTIONS = (
    "Persistent Python pads: call `scratchpad` with action exec to run code; variables stay "
    "between calls to the same pad name. Large outputs are saved as observations; read them "
    "with `read_observation`."
)


def create_mcp_server(
    manager: ScratchpadManager,
    store: ObservationStore | None = None,
    *,
    forms: PendingForms | None = None,
    link_for: Callable[[str], str] | None = None,
) -> Server[Any]:
    """An MCP server over ``manager``'s pads (and ``store``'s observations, when given).
    With ``forms`` and ``link_for`` (a form id → the absolute URL of a one-time link to its
    page) it offers ``request_credentials`` too (:mod:`scratchpad.server.mcp_credentials`)."""
    registry = builtin_registry(manager, store, images=False)
    credentials = None
    if forms is not None and link_for is not None:
        wait_s = manager.settings.form_wait_s
        credentials = mcp_credentials.CredentialsTool(forms, link_for, wait_s=wait_s)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        now = await asyncio.to_thread(current_description, manager)  # the vault's names now

        def description(tool: ToolDef) -> str:
            return now if tool.name == SCRATCHPAD else tool.description

        tools = [mcp_tool(t, description(t)) for t in registry.offered()]
        return types.ListToolsResult(tools=tools + ([credentials.tool()] if credentials else []))

    def new_context() -> ToolSessionContext:
        return ToolSessionContext(manager=manager, store=store, turn_id=TURN_ID)

    tasks = TasksExtension(manager, registry.dispatch, new_context, call_result)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if credentials is not None and params.name == mcp_credentials.NAME:
            return await credentials.call(ctx, params)
        progress = ProgressRelay(ctx)
        context = ToolSessionContext(
            manager=manager, store=store, turn_id=TURN_ID, on_progress=progress.put
        )
        try:
            outcome = await registry.dispatch(params.name, params.arguments or {}, context)
        except BaseException:  # cancelled: the client is gone, so is its progress
            progress.stop()
            raise
        await progress.finish()
        return call_result(outcome)

    server: Server[Any] = Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS + (mcp_credentials.INSTRUCTIONS if credentials else ""),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    install(server, tasks, call_tool)
    return server


def mcp_tool(tool: ToolDef, description: str) -> types.Tool:
    """A tool as MCP lists it: its schema, title and annotations (hints for clients)."""
    hints = tool.hints
    annotations = None
    if hints is not None:
        annotations = types.ToolAnnotations(
            title=tool.title,
            read_only_hint=hints.read_only,
            destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent,
            open_world_hint=hints.open_world,
        )
    return types.Tool(
        name=tool.name,
        title=tool.title,
        description=description,
        input_schema=tool.input_schema,
        annotations=annotations,
    )


class ProgressRelay:
    """Sends a tool's progress messages as MCP progress notifications, in order, from one
    task; the tool's callback is synchronous and must never wait on the client. While the
    call lasts, a quiet stretch of ``KEEPALIVE_S`` sends a "still running" notification:
    clients that reset their timeout on progress (TypeScript's) keep waiting for a long
    cell. Without a progress token in the request, nothing is sent (the SDK's rule)."""

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self._ctx = ctx
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._began = time.monotonic()
        self._sender = asyncio.create_task(self._send())

    def put(self, message: str) -> None:
        self._queue.put_nowait(scrub(message))

    async def finish(self) -> None:
        """Send what is queued, then stop."""
        self._queue.put_nowait(None)
        await self._sender

    def stop(self) -> None:
        """Stop at once (the call was cancelled: nobody listens)."""
        self._sender.cancel()

    async def _send(self) -> None:
        count = 0
        while True:
            try:
                message = await asyncio.wait_for(self._queue.get(), KEEPALIVE_S)
            except TimeoutError:
                message = f"still running ({time.monotonic() - self._began:.0f} s)"
            if message is None:
                return
            count += 1
            try:
                await self._ctx.session.report_progress(count, None, message)
            except Exception:  # a client that went away must not fail the call
                continue


def call_result(outcome: ToolOutcome) -> types.CallToolResult:
    """A tool outcome as MCP content: text blocks (scrubbed: whatever tool made them), and
    images as image content."""
    content: list[types.ContentBlock] = []
    for block in outcome.blocks():
        if isinstance(block, TextBlock):
            content.append(types.TextContent(text=scrub(block.text)))
        elif isinstance(block, ImageBlock):
            content.append(types.ImageContent(data=block.data, mime_type=block.media_type))
    return types.CallToolResult(content=content, is_error=not outcome.ok)


def streamable_http_app(
    server: Server[Any],
) -> tuple[StreamableHTTPASGIApp, StreamableHTTPSessionManager]:
    """The ASGI endpoint for ``/mcp`` and the session manager whose ``run()`` must wrap the
    host app's lifespan. DNS-rebinding checks are left to the host app: it requires the
    bearer key on every request and allows only its own origin."""
    sessions = StreamableHTTPSessionManager(app=server)
    return StreamableHTTPASGIApp(sessions), sessions


async def serve_stdio(manager: ScratchpadManager, store: ObservationStore | None = None) -> None:
    """Serve ``manager``'s pads over this process's stdin/stdout until the client closes them."""
    server = create_mcp_server(manager, store)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
