"""The ASGI app: the remote-backend protocol (``/scratchpad/*``), read endpoints (``/v1/*``),
MCP over streamable HTTP (``/mcp``) and ``/healthz``. Every route but ``/healthz`` needs the
bearer key or a browser session (``guard.py``, ``login_routes.py``); every failure answers a
4xx/5xx JSON body ``{"error": ..., "type": ...}`` that says what was wrong (MCP answers in its
own protocol once past the key check).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.routing import Match, Route
from starlette.types import Scope

from scratchpad import __version__, events
from scratchpad.connect.pending import PendingForms
from scratchpad.connect.probe import stop_probes
from scratchpad.errors import (
    InstallError,
    InvalidInputError,
    ScratchpadError,
)
from scratchpad.events import (
    CancelRequest,
    ExecuteFrame,
    ExecuteRequest,
    ForkRequest,
    InstallRequest,
    PadRequest,
    StartRequest,
)
from scratchpad.fsutil import NO_SPACE, disk_full
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime import confinement
from scratchpad.runtime.accepts import remember
from scratchpad.runtime.base import PadLLM, ScratchpadRuntime, check_cell_id, check_execute_args
from scratchpad.runtime.cell import new_cell_id
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.timeouts import check_timeout
from scratchpad.server.browser_auth import FORM_PREFIX, BrowserSessions
from scratchpad.server.cells_routes import cells_routes
from scratchpad.server.conditional import VALIDATOR_HEADERS, Validators, answer_bytes, documented
from scratchpad.server.datavault_routes import datavault_routes
from scratchpad.server.files_routes import files_routes, upload_limit
from scratchpad.server.forms_routes import forms_routes
from scratchpad.server.frames import cell_frames
from scratchpad.server.guard import EncodedNames, Guard, error, refusal, segment_name
from scratchpad.server.headers import SecurityHeaders, content_disposition
from scratchpad.server.hosts import OwnHosts, link_base
from scratchpad.server.housekeeping import housekeeping
from scratchpad.server.login_routes import login_routes
from scratchpad.server.mcp_server import create_mcp_server, streamable_http_app
from scratchpad.server.openapi import answers, api_docs, attachment, sse
from scratchpad.server.pad_feed_routes import pad_feed_routes
from scratchpad.server.schemas import (
    CancelAnswer,
    InstallAnswer,
    Notebook,
    Ok,
    PadCells,
    PadList,
    PadPath,
    ResetAnswer,
    RevertAnswer,
    ServerInfo,
)
from scratchpad.server.sse import EventStream
from scratchpad.server.vault_routes import prime_vault, vault_routes
from scratchpad.server.web_routes import web_routes
from scratchpad.wire import made, wire

log = logging.getLogger(__name__)
MARKDOWN = {"type": "string", "description": "The pad as notebook markdown."}
IPYNB = "application/x-ipynb+json"
PAD_FIELDS = tuple(events.PadInfo.model_fields)  # a pad's line: runtime/padinfo.py's PadInfo
OK = wire(Ok(ok=True))  # the same data for every plain "done" (FastAPI encodes a copy)
NAMED = attachment("`attachment`, named after the pad: an ASCII stand-in, then in UTF-8.")


def create_app(
    manager: ScratchpadManager,
    *,
    api_key: str,
    origin: str | None = None,
    store: ObservationStore | None = None,
    on_shutdown: Callable[[], None] | None = None,
) -> FastAPI:
    """The server for ``manager``'s pads (and ``store``'s observations, read over MCP and
    garbage-collected while it runs), guarded by ``api_key``. Browsers may call it only from
    ``origin`` (the server's own); shutting down closes every pad (venvs are kept), then
    calls ``on_shutdown``."""
    forms = PendingForms()  # the forms the model asked for over MCP, filled in on a page
    sessions = BrowserSessions(manager.settings.session_ttl_s)  # app.state.browser_sessions
    mcp_server = create_mcp_server(
        manager, store, forms=forms, link_for=_form_link(origin, sessions)
    )
    mcp_endpoint, mcp_sessions = streamable_http_app(mcp_server)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        gc_every = manager.settings.observation_gc_interval_s
        await prime_vault(manager)  # every stored secret known before any output leaves
        try:
            async with mcp_sessions.run(), housekeeping(store, gc_every):
                yield
        finally:
            await stop_probes(reason="the server stopped")
            await manager.close_all(reason="the server stopped")  # in-process apps (tests)
            if on_shutdown is not None:
                on_shutdown()

    app = FastAPI(
        title="Scratchpad", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None
    )
    app.state.forms = forms  # the pending forms, reachable from the app (tests open some)
    hosts = OwnHosts(origin, manager.settings.allowed_hosts)
    limit, uploads = manager.settings.max_request_bytes, upload_limit(manager.settings)
    app.add_middleware(
        Guard, api_key=api_key, limit=limit, streamed=uploads, sessions=sessions, hosts=hosts
    )
    app.add_middleware(EncodedNames)
    if origin:  # outside the guard, so preflights and refusals carry CORS headers too
        app.add_middleware(
            CORSMiddleware, allow_origins=[origin], allow_methods=["*"], allow_headers=["*"]
        )
    app.add_middleware(SecurityHeaders)  # outermost: on every answer, refusals too
    _error_handlers(app, manager.settings.home)
    _protocol_routes(app, manager)
    _read_routes(app, manager)
    pad_feed_routes(app, manager)
    app.include_router(cells_routes(manager))
    vault_routes(app, manager)
    datavault_routes(app, manager, forms)
    forms_routes(app, forms)
    files_routes(app, manager)
    web_routes(app)
    api_docs(app)
    login_routes(app, sessions, origin)
    app.router.routes.append(Route("/mcp", endpoint=mcp_endpoint))
    return app


def _form_link(origin: str | None, sessions: BrowserSessions) -> Callable[[str], str] | None:
    """How the MCP server links a person to a form's page: a one-time login link whose
    session reaches that form only; None without an origin (no page to link to)."""
    if not origin:
        return None
    base = link_base(origin)

    def link(form_id: str) -> str:
        page = f"/connect/{quote(form_id, safe='')}"
        return sessions.link(base, scope=f"{FORM_PREFIX}{form_id}", next_path=page)

    return link


def _error_handlers(app: FastAPI, home: Path) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(_describe(e) for e in exc.errors())
        return error(422, f"invalid request: {problems}", "InvalidInputError")

    @app.exception_handler(ScratchpadError)
    async def failed(request: Request, exc: ScratchpadError) -> JSONResponse:
        return refusal(exc)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        where = f"{request.method} {request.url.path}"
        if exc.status_code == 404:
            return error(404, f"no such route: {where}", "NotFound")
        if exc.status_code == 405:  # RFC 9110: a 405 says what the path takes
            allowed = _allowed(app, request.scope) or (exc.headers or {}).get("Allow", "")
            message = f"method not allowed on this route: {where}; it takes {allowed}"
            refusal = error(405, message, "MethodNotAllowed")
            refusal.headers["allow"] = allowed
            return refusal
        if exc.status_code == 400:  # Starlette could not read the body at all
            message = f"the request body could not be read ({exc.detail}); send UTF-8 JSON"
            return error(400, message, "InvalidInputError")
        return error(exc.status_code, f"{exc.detail}: {where}", "HTTPError")

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, OSError) and exc.errno in NO_SPACE:  # a write of no module's own
            full = disk_full(home, exc.errno)
            log.warning("%s %s failed: %s", request.method, request.url.path, full)
            return error(507, str(full), type(full).__name__)
        log.exception("%s %s failed", request.method, request.url.path)
        message = "internal server error; the server log has the details"
        return error(500, message, "InternalError")


def _allowed(app: FastAPI, scope: Scope) -> str:
    """The methods the routes at ``scope``'s path take, for ``Allow`` (Starlette names only
    the first route that matched the path; a path may have one per method)."""
    methods: set[str] = set()
    for route in app.router.routes:
        if route.matches(scope)[0] is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return ", ".join(sorted(methods))


NOT_A_PACKAGE = (
    "is an option, not a package: give names with optional versions ('pandas>=2'), URLs or "
    "paths (for a requirements file, its lines)"
)


def _protocol_routes(app: FastAPI, manager: ScratchpadManager) -> None:
    @app.post("/scratchpad/start", **answers(Ok, 400, 422, 503))
    async def start(body: StartRequest) -> dict[str, Any]:
        limits = None if body.limits is None else body.limits.model_dump()
        pad = await manager.get_or_create(body.name, limits=limits, resources=body.resources)
        llm = PadLLM(
            provider=body.coding_provider or "",
            model=body.coding_model or "",
            api_key=body.coding_api_key or "",
            base_url=body.coding_base_url or "",
        )
        await pad.configure_llm(llm)
        return OK

    @app.post("/scratchpad/reset", **answers(ResetAnswer, 400, 409, 422, 503))
    async def reset(body: PadRequest) -> dict[str, Any]:
        """Reset the pad; one that is gone (another client removed it) has nothing to reset."""
        if not manager.exists(body.name):
            return wire(ResetAnswer(ok=True, reset=False))
        await (await manager.get_or_create(body.name)).reset()
        return wire(ResetAnswer(ok=True, reset=True))

    @app.post("/scratchpad/revert", **answers(RevertAnswer, 400, 409, 422, 503))
    async def revert(body: PadRequest) -> dict[str, Any]:
        """Put the pad's variables back as they were before its last cell that changed them
        (our extension); a pad that is gone has nothing to revert."""
        if not manager.exists(body.name):
            return wire(RevertAnswer(ok=True, reverted=False, after_cell=None))
        back = await manager.revert(body.name)
        return wire(RevertAnswer(ok=True, reverted=True, after_cell=back))

    @app.post("/scratchpad/close", **answers(Ok, 400, 422))
    async def close(body: PadRequest) -> dict[str, Any]:
        await manager.close(body.name)
        return OK

    @app.post("/scratchpad/cancel", **answers(CancelAnswer, 400, 422))
    async def cancel(body: CancelRequest) -> dict[str, Any]:
        """Cancel the pad's running cell (or cell ``id``); a pad that is gone has none."""
        check_cell_id(body.id)
        cancelled = await manager.cancel(body.name, body.id)
        return wire(CancelAnswer(ok=True, cancelled=cancelled))

    @app.post("/scratchpad/cleanup", **answers(Ok, 400, 422))
    async def cleanup(body: PadRequest) -> dict[str, Any]:
        if manager.exists(body.name):
            await manager.remove(body.name)
        return OK

    @app.post("/scratchpad/install", **answers(InstallAnswer, 400, 409, 422, 503))
    async def install(body: InstallRequest) -> dict[str, Any]:
        return wire(InstallAnswer(result=await _install(manager, body)))

    @app.post("/scratchpad/execute-stream", **sse(ExecuteFrame, 400, 409, 422, 503))
    async def execute_stream(body: ExecuteRequest) -> EventStream:
        timeout_s = None
        if body.timeout_s is not None:
            timeout_s = check_timeout(body.timeout_s, manager.settings)
        cell_id = check_cell_id(body.id) or new_cell_id()
        pad = await manager.get_or_create(body.name)  # errors here answer as plain 4xx
        follower = body.id is not None and pad.knows(body.id)  # a repeat: not its to cancel
        frames = cell_frames(
            pad,
            code=body.code,
            description=body.description,
            estimated_time=body.estimated_time,
            estimated_seconds=_estimate(body.estimated_seconds),
            timeout_s=timeout_s,
            cell_id=cell_id,
            stream_output=body.stream_output,
        )
        keep_going = body.on_disconnect == "continue" or follower
        if body.on_disconnect == "continue" and not follower:
            with contextlib.suppress(InvalidInputError):  # said in the stream, as before
                request = check_execute_args(
                    body.code, body.description, _estimate(body.estimated_seconds),
                    body.estimated_time, cell_id, timeout_s,
                )  # fmt: skip
                remember(pad, request, timeout_s)  # a detached cell: in the accept log too
        gone = None if keep_going else _interrupter(pad, cell_id)
        return EventStream(frames, on_disconnect=gone)


async def _install(manager: ScratchpadManager, body: InstallRequest) -> str:
    """What an install answers: the installer's output, or why it failed (the protocol
    reports a failed install as its result)."""
    if not body.packages:
        return "No packages specified."
    options = [s for s in body.packages if any(w.startswith("-") for w in s.split())]
    if options:  # e.g. "-r FILE": answered as the protocol's other server's pip would
        return f"Install failed (refused): {options[0]!r} {NOT_A_PACKAGE}"
    pad = await manager.get_or_create(body.name)
    try:
        return await pad.install_packages(body.packages)
    except InstallError as exc:
        code = "timed out" if exc.exit_code is None else f"exit {exc.exit_code}"
        return f"Install failed ({code}): {exc}"  # the local words, output too


def _estimate(seconds: float | None) -> float:
    """The protocol's estimate: anything but a finite number >= 0 means "no estimate"."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return 0.0
    return seconds


_cancels: set[asyncio.Task[bool]] = set()


def _interrupter(pad: ScratchpadRuntime, cell_id: str) -> Callable[[], None]:
    """What a client's disconnect does by default: cancel its cell (state kept)."""

    def interrupt() -> None:
        task = asyncio.get_running_loop().create_task(pad.cancel(cell_id))
        _cancels.add(task)
        task.add_done_callback(_cancels.discard)

    return interrupt


def _read_routes(app: FastAPI, manager: ScratchpadManager) -> None:
    @app.get("/healthz", **answers(Ok))
    async def healthz() -> dict[str, Any]:
        return OK

    @app.get("/v1/server", **answers(ServerInfo))
    async def server() -> dict[str, Any]:
        """Who answers here: a cheap, authenticated identity check for clients."""
        report = await asyncio.to_thread(confinement.report, manager.settings)
        mine = {"pid": os.getpid(), "version": __version__, "running_pads": manager.names()}
        return wire(ServerInfo.model_validate({**mine, **report}))

    @app.get("/v1/pads", **answers(PadList))
    async def pads() -> dict[str, Any]:
        listed = await manager.list_pads()  # built unchecked: a line per pad, each call
        lines = [made(events.PadInfo, {f: getattr(info, f) for f in PAD_FIELDS}) for info in listed]
        return wire(made(PadList, {"pads": lines}))

    @app.get("/v1/pads/{name}", **answers(PadCells, 400, 404))
    async def pad_cells(name: PadPath) -> Response:
        name = segment_name(name)
        cells = list(await manager.peek(name).load_cells())
        return await _json(
            lambda: wire(made(PadCells, {"name": name, "cells": list(map(events.cell_of, cells))}))
        )

    fork_answers = answers(
        events.PadInfo, 400, 404, 422, 503, 507, also={201: "The new pad, asleep."}
    )

    @app.post("/v1/pads/{name}/fork", **fork_answers)
    async def pad_fork(name: PadPath, body: ForkRequest) -> JSONResponse:
        """A new pad `to`, a copy of this one: its packages, variables and cells (the vault's
        grants are not copied). It starts asleep; this pad is left as it was."""
        info = await manager.fork(segment_name(name), body.to)
        line = wire(made(events.PadInfo, {f: getattr(info, f) for f in PAD_FIELDS}))
        return JSONResponse(line, status_code=201)

    markdown_answers = _export_answers(MARKDOWN, "text/markdown")
    notebook_answers = _export_answers(Notebook, IPYNB)

    @app.head("/v1/pads/{name}/dump", **markdown_answers)
    @app.get("/v1/pads/{name}/dump", **markdown_answers)
    async def pad_dump(name: PadPath, request: Request) -> Response:
        return await _export(manager, segment_name(name), request, "md")

    @app.head("/v1/pads/{name}/notebook", **notebook_answers)
    @app.get("/v1/pads/{name}/notebook", **notebook_answers)
    async def pad_notebook(name: PadPath, request: Request) -> Response:
        return await _export(manager, segment_name(name), request, "ipynb")


def _export_answers(body: type[BaseModel] | dict[str, Any], media_type: str) -> dict[str, Any]:
    """A pad export's documented answers: the file, its versions and ranges."""
    options = answers(
        body,
        400,
        404,
        416,
        media_type=media_type,
        headers={**NAMED, **VALIDATOR_HEADERS},
        description="The export (HEAD: its headers only).",
    )
    options["responses"].update(documented(options["responses"][200]["content"]))
    return options


async def _export(
    manager: ScratchpadManager, name: str, request: Request, kind: Literal["md", "ipynb"]
) -> Response:
    """Pad ``name`` as notebook markdown or nbformat JSON, conditional and ranged: its ETag
    hashes the bytes, its Last-Modified is its history's."""
    pad = manager.peek(name)
    await pad.load_cells()
    if kind == "md":
        body = (await asyncio.to_thread(pad.dump)).encode()
        media_type = "text/markdown; charset=utf-8"
    else:
        notebook = lambda: json.dumps(wire(made(Notebook, pad.to_ipynb())), indent=1)  # noqa: E731
        body = (await asyncio.to_thread(notebook)).encode()
        media_type = IPYNB
    modified = await asyncio.to_thread(manager.history_modified, name)
    named = {"content-disposition": content_disposition(f"{name}.{kind}")}
    version = Validators.of_bytes(body, modified)
    return answer_bytes(request.headers, request.method, body, media_type, named, version)


async def _json(build: Callable[[], Any]) -> Response:
    """A JSON answer built and encoded on a worker thread: a pad's cells can be many MB, and
    the event loop serves every other pad meanwhile."""
    body = await asyncio.to_thread(lambda: json.dumps(build(), ensure_ascii=False).encode())
    return Response(body, media_type="application/json")


def _describe(problem: dict[str, Any]) -> str:
    if problem.get("type") == "json_invalid":
        position = problem.get("loc", ("body", "?"))[-1]
        detail = problem.get("ctx", {}).get("error", "JSON decode error")
        return f"the body is not valid JSON ({detail} at character {position})"
    where = ".".join(str(part) for part in problem.get("loc", ()) if part != "body")
    return f"{where or 'body'}: {problem.get('msg', 'invalid')}"
