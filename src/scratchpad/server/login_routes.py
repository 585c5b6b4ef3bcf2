"""Logging a browser in and out: ``GET /login?token=…`` (a one-time link → a session cookie),
``POST /v1/login-links`` (a fresh link, for the CLI's ``scratchpad login`` and the UI),
``POST /logout``. The sessions live in ``app.state.browser_sessions``."""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from scratchpad.server.browser_auth import (
    FULL,
    LOGIN_TTL_S,
    SESSION_COOKIE,
    BrowserSessions,
    auth_of,
)
from scratchpad.server.guard import BEARER, error
from scratchpad.server.hosts import link_base
from scratchpad.server.openapi import answers
from scratchpad.server.pages import link_spent, logged_in
from scratchpad.server.schemas import LoginLink, Ok

COOKIE_RULES = "HttpOnly; SameSite=Strict; Path=/"  # no Secure: loopback is plain http
NO_STORE = {"cache-control": {"schema": {"type": "string", "const": "no-store"}}}


class LinkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    next: str = Field("/", description="The page the link opens: a path here, e.g. '/'.")
    scope: str = Field(FULL, description="'all', or 'form:<form_id>' (that form only).")


def login_routes(app: FastAPI, sessions: BrowserSessions, origin: str | None) -> None:
    app.state.browser_sessions = sessions
    app.state.login_base = link_base(origin) if origin else None

    @app.get("/login", include_in_schema=False)
    async def login(token: str = "") -> Response:
        found = sessions.redeem(token)
        if found is None:
            return link_spent()
        response = logged_in(found.next_path)
        response.headers["set-cookie"] = f"{SESSION_COOKIE}={found.session_id}; {COOKIE_RULES}"
        response.headers["cache-control"] = "no-store"
        return response

    @app.post("/v1/login-links", **answers(LoginLink, 400, 403, 422, headers=NO_STORE))
    async def login_link(request: Request, body: LinkRequest | None = None) -> Response:
        """A one-time browser login link (10 minutes) that opens `next` (a path here) for a
        session of `scope` (`all`, or `form:<form_id>`: that credential form only)."""
        if auth_of(request) not in (BEARER, FULL):
            return error(
                403, "only the API key or a full session may make login links", "Forbidden"
            )
        body = body or LinkRequest()
        base = app.state.login_base or str(request.base_url)
        expires_at = time.time() + LOGIN_TTL_S
        url = sessions.link(base, scope=body.scope, next_path=body.next)
        answer: dict[str, Any] = {"url": url, "expires_at": expires_at}
        return JSONResponse(answer, headers={"cache-control": "no-store"})

    @app.post("/logout", **answers(Ok, 403))
    async def logout(request: Request) -> Response:
        """End this browser's session (its cookie is cleared)."""
        session_id = request.cookies.get(SESSION_COOKIE)
        if session_id:
            sessions.forget(session_id)
        response = JSONResponse({"ok": True})
        response.headers["set-cookie"] = f"{SESSION_COOKIE}=; Max-Age=0; {COOKIE_RULES}"
        return response


def login_link(app: FastAPI, scope: str = FULL, next_path: str = "/") -> str:
    """A fresh login link to a served app (its address from ``create_app``'s ``origin``)."""
    sessions: BrowserSessions = app.state.browser_sessions
    base: str = app.state.login_base or "http://127.0.0.1"
    return sessions.link(base, scope=scope, next_path=next_path)
