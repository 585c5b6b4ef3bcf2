"""The ASGI app: the remote-backend protocol (``/scratchpad/*``), read endpoints (``/v1/*``),
MCP over streamable HTTP (``/mcp``) and ``/healthz``. Every route but ``/healthz`` needs the
bearer key; every failure answers a 4xx/5xx JSON body ``{"error": ...}`` that says what was
wrong (MCP answers in its own protocol once past the key check).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict
from starlette.routing import Route

from scratchpad import __version__
from scratchpad.errors import (
    InvalidInputError,
    PadClosedError,
    PadNotFoundError,
    ScratchpadError,
)
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.cell import Cell, DisplayEvent, OutputEvent, ProgressEvent
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.names import validate_pad_name
from scratchpad.server.guard import Guard, error
from scratchpad.server.mcp_server import create_mcp_server, streamable_http_app
from scratchpad.server.sse import EventStream


class PadRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # clients written elsewhere may send more
    name: str


class StartRequest(PadRequest):
    coding_provider: str | None = None
    coding_model: str | None = None
    coding_api_key: str | None = None
    coding_base_url: str | None = None


class InstallRequest(PadRequest):
    packages: list[str]


class ExecuteRequest(PadRequest):
    code: str
    description: str = ""
    estimated_time: str = ""
    estimated_seconds: float = 0.0
    # Our extension: also send output and display frames as they happen. Off by default, so
    # clients written for the plain protocol never see frame types they do not know.
    stream_output: bool = False


def create_app(
    manager: ScratchpadManager,
    *,
    api_key: str,
    origin: str | None = None,
    store: ObservationStore | None = None,
    on_shutdown: Callable[[], None] | None = None,
) -> FastAPI:
    """The server for ``manager``'s pads (and ``store``'s observations, read over MCP),
    guarded by ``api_key``. Browsers may call it only from ``origin`` (the server's own);
    shutting down closes every pad (venvs are kept), then calls ``on_shutdown``."""
    mcp_endpoint, mcp_sessions = streamable_http_app(create_mcp_server(manager, store))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            async with mcp_sessions.run():
                yield
        finally:
            await manager.close_all()
            if on_shutdown is not None:
                on_shutdown()

    app = FastAPI(title="Scratchpad", version=__version__, lifespan=lifespan)
    app.add_middleware(Guard, api_key=api_key, limit=manager.settings.max_request_bytes)
    if origin:  # outermost, so preflights and refusals carry CORS headers too
        app.add_middleware(
            CORSMiddleware, allow_origins=[origin], allow_methods=["*"], allow_headers=["*"]
        )

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(_describe(e) for e in exc.errors())
        return error(422, f"invalid request: {problems}")

    @app.exception_handler(ScratchpadError)
    async def failed(request: Request, exc: ScratchpadError) -> JSONResponse:
        return error(_status(exc), str(exc))

    _protocol_routes(app, manager)
    _read_routes(app, manager)
    app.router.routes.append(Route("/mcp", endpoint=mcp_endpoint))
    return app


def _protocol_routes(app: FastAPI, manager: ScratchpadManager) -> None:
    @app.post("/scratchpad/start")
    async def start(body: StartRequest) -> dict[str, Any]:
        await manager.get_or_create(body.name)
        return {"ok": True}

    @app.post("/scratchpad/reset")
    async def reset(body: PadRequest) -> dict[str, Any]:
        await (await manager.get_or_create(body.name)).reset()
        return {"ok": True}

    @app.post("/scratchpad/close")
    async def close(body: PadRequest) -> dict[str, Any]:
        await manager.close(body.name)
        return {"ok": True}

    @app.post("/scratchpad/cancel")
    async def cancel(body: PadRequest) -> dict[str, Any]:
        if validate_pad_name(body.name) in manager.names():
            await manager.get(body.name).cancel()
        return {"ok": True}

    @app.post("/scratchpad/cleanup")
    async def cleanup(body: PadRequest) -> dict[str, Any]:
        await manager.remove(body.name)
        return {"ok": True}

    @app.post("/scratchpad/install")
    async def install(body: InstallRequest) -> dict[str, Any]:
        pad = await manager.get_or_create(body.name)
        return {"result": await pad.install_packages(body.packages)}

    @app.post("/scratchpad/execute-stream")
    async def execute_stream(body: ExecuteRequest) -> EventStream:
        pad = await manager.get_or_create(body.name)  # errors here answer as plain 4xx
        return EventStream(_frames(pad, body))


async def _frames(pad: Any, body: ExecuteRequest) -> AsyncIterator[dict[str, Any]]:
    """SSE frames: progress messages (and, when asked, output and display), then exactly one
    cell (or one error)."""
    try:
        async for item in pad.execute_streaming(
            body.code,
            description=body.description,
            estimated_time=body.estimated_time,
            estimated_seconds=body.estimated_seconds,
        ):
            if isinstance(item, ProgressEvent):
                yield {"type": "progress", "message": item.message}
            elif isinstance(item, OutputEvent) and body.stream_output:
                yield {"type": "output", "stream": item.stream, "text": item.text}
            elif isinstance(item, DisplayEvent) and body.stream_output:
                yield {"type": "display", "data": item.data}
            elif isinstance(item, Cell):
                yield {"type": "cell", "cell": item.to_dict()}
    except ScratchpadError as exc:
        yield {"type": "error", "error": str(exc)}


def _read_routes(app: FastAPI, manager: ScratchpadManager) -> None:
    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"ok": True}

    @app.get("/v1/server")
    async def server() -> dict[str, Any]:
        """Who answers here: a cheap, authenticated identity check for clients."""
        return {"pid": os.getpid(), "version": __version__, "running_pads": manager.names()}

    @app.get("/v1/pads")
    async def pads() -> dict[str, Any]:
        running = set(manager.names())
        listed = []
        for name in sorted(running | set(manager.names_on_disk())):
            pad = manager.peek(name)
            status = "busy" if pad.busy else "idle" if name in running else "stopped"
            listed.append({"name": name, "status": status, "cells": len(pad.cells)})
        return {"pads": listed}

    @app.get("/v1/pads/{name}")
    async def pad_cells(name: str) -> dict[str, Any]:
        pad = manager.peek(name)
        return {"name": pad.name, "cells": [cell.to_dict() for cell in pad.cells]}

    @app.get("/v1/pads/{name}/dump")
    async def pad_dump(name: str) -> Response:
        return Response(manager.peek(name).dump(), media_type="text/markdown; charset=utf-8")

    @app.get("/v1/pads/{name}/notebook")
    async def pad_notebook(name: str) -> Response:
        notebook = json.dumps(manager.peek(name).to_ipynb(), indent=1)
        return Response(
            notebook,
            media_type="application/x-ipynb+json",
            headers={"content-disposition": f'attachment; filename="{name}.ipynb"'},
        )


def _status(exc: ScratchpadError) -> int:
    if isinstance(exc, PadNotFoundError):
        return 404
    if isinstance(exc, InvalidInputError):
        return 400
    if isinstance(exc, PadClosedError):
        return 409
    return 500


def _describe(problem: dict[str, Any]) -> str:
    where = ".".join(str(part) for part in problem.get("loc", ()) if part != "body")
    return f"{where or 'body'}: {problem.get('msg', 'invalid')}"
