"""Logging a browser tab in and out: ``GET /login?token=…`` (the page a one-time link opens),
``POST /login`` (its script trades the token for the tab's session), ``POST /v1/login-links``
(a fresh link, for the CLI's ``scratchpad login`` and the UI), ``POST /logout`` (ends the
whole login), and ``POST /v1/signed-urls`` (a download the browser fetches without script).
The sessions live in ``app.state.browser_sessions``."""

from __future__ import annotations

import time
from urllib.parse import SplitResult, parse_qsl, urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from scratchpad.errors import ForbiddenError, InvalidInputError, UnauthorizedError
from scratchpad.server.browser_auth import (
    FULL,
    LOGIN_TTL_S,
    SIGNATURE_PARAM,
    BrowserSessions,
    auth_of,
    session_of,
    signable,
    signed_target,
)
from scratchpad.server.guard import BEARER, canonical_path, refusal
from scratchpad.server.hosts import link_base
from scratchpad.server.openapi import answers
from scratchpad.server.pages import link_spent, logging_in
from scratchpad.server.schemas import Ok
from scratchpad.wire import wire

NO_STORE = {"cache-control": {"schema": {"type": "string", "const": "no-store"}}}
SPENT = (
    "this login link no longer works: it was used already, it expired, its login was logged "
    "out, or the server restarted since; `scratchpad login` prints a new one"
)


class LoginLink(BaseModel):
    url: str = Field(description="A one-time link: opening it logs a browser in.")
    expires_at: float = Field(description="Epoch seconds: unused after that, it is void.")


class BrowserSession(BaseModel):
    """What a login link's token gives: a session for one browser tab."""

    session: str = Field(description="Send it as the X-Scratchpad-Session header.")
    scope: str = Field(description="'all', or 'form:<form_id>' (that form only).")
    next: str = Field(description="The page the link opens (a path here).")
    expires_at: float = Field(description="Epoch seconds: the session ends then, or at logout.")


class SignedUrl(BaseModel):
    url: str = Field(description="The path with its signature (`sig`): GET it with no header.")
    expires_at: float = Field(description="Epoch seconds: the URL is void after that.")


class LinkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    next: str = Field("/", description="The page the link opens: a path here, e.g. '/'.")
    scope: str = Field(FULL, description="'all', or 'form:<form_id>' (that form only).")


class TokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: str = Field(description="The `token` of a login link.")


class SignRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(
        description="A download's path and query, e.g. '/v1/pads/main/files/plot.png?"
        "download=true' (files, notebook, dump)."
    )


def login_routes(app: FastAPI, sessions: BrowserSessions, origin: str | None) -> None:
    app.state.browser_sessions = sessions
    app.state.login_base = link_base(origin) if origin else None

    @app.get("/login", include_in_schema=False)
    async def login_page(token: str = "") -> Response:
        """The page a link opens; its script redeems the token (``POST /login``)."""
        return logging_in() if sessions.pending(token) else link_spent()

    @app.post("/login", **answers(BrowserSession, 401, 403, 422, headers=NO_STORE))
    async def login(body: TokenRequest) -> Response:
        """Trade a login link's token (once) for a browser tab's session. The web UI keeps it
        in the tab's sessionStorage and sends it as the `X-Scratchpad-Session` header."""
        found = sessions.redeem(body.token)
        if found is None:
            return refusal(UnauthorizedError(SPENT))
        answer = BrowserSession(
            session=found.session_id,
            scope=found.scope,
            next=found.next_path,
            expires_at=time.time() + sessions.session_ttl_s,
        )
        return _no_store(answer)

    @app.post("/v1/login-links", **answers(LoginLink, 400, 403, 422, headers=NO_STORE))
    async def login_link(request: Request, body: LinkRequest | None = None) -> Response:
        """A one-time browser login link (10 minutes) that opens `next` (a path here) for a
        session of `scope` (`all`, or `form:<form_id>`: that credential form only). A link
        made by a browser session ends when that session logs out."""
        if auth_of(request) not in (BEARER, FULL):
            raise ForbiddenError("only the API key or a full session may make login links")
        body = body or LinkRequest()
        base = app.state.login_base or str(request.base_url)
        expires_at = time.time() + LOGIN_TTL_S
        by = session_of(request)
        url = sessions.link(base, scope=body.scope, next_path=body.next, by=by)
        return _no_store(LoginLink(url=url, expires_at=expires_at))

    @app.post("/logout", **answers(Ok, 403))
    async def logout(request: Request) -> Response:
        """Log out the login of the session in `X-Scratchpad-Session`: every session of it
        (the tabs it was handed to, those of the links it made) and its unused links."""
        session_id = session_of(request)
        if session_id:
            sessions.log_out(session_id)
        return JSONResponse(wire(Ok(ok=True)))

    @app.post("/v1/signed-urls", **answers(SignedUrl, 400, 403, 422, headers=NO_STORE))
    async def sign(request: Request, body: SignRequest) -> Response:
        """A short-lived URL for a download the browser fetches without script (a link, an
        image), good for that path and query only, while this browser session lives."""
        session_id = session_of(request)
        if session_id is None or auth_of(request) != FULL:
            message = "signed URLs are for a full browser session; with the key, GET the path"
            raise ForbiddenError(message)
        target = _download_target(body.url)  # "<path>?<query>"
        signature, expires_at = sessions.sign(session_id, target)
        joint = "" if target.endswith("?") else "&"
        url = f"{target}{joint}{SIGNATURE_PARAM}={signature}"
        return _no_store(SignedUrl(url=url, expires_at=expires_at))


def _no_store(answer: BaseModel) -> JSONResponse:
    """An answer holding a secret (a session, a link, a signature): never kept by a cache."""
    return JSONResponse(wire(answer), headers={"cache-control": "no-store"})


def _download_target(url: str) -> str:
    """What a signature of a download's path and query covers (see ``signed_target``)."""
    try:
        parts: SplitResult | None = urlsplit(url)
    except ValueError:  # e.g. an unclosed '[' of an IPv6 host
        parts = None
    path = canonical_path(parts.path) if parts else ""
    if not parts or parts.scheme or parts.netloc or parts.fragment or not signable(path):
        raise InvalidInputError(
            f"only downloads on this server can be signed (a pad's file, notebook or dump, "
            f"e.g. '/v1/pads/main/files/plot.png'); got {url[:100]!r}"
        )
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if any(name == SIGNATURE_PARAM for name, _ in pairs):
        raise InvalidInputError(f"the URL to sign already has a {SIGNATURE_PARAM!r} parameter")
    return signed_target(path, pairs)


def login_link(app: FastAPI, scope: str = FULL, next_path: str = "/") -> str:
    """A fresh login link to a served app (its address from ``create_app``'s ``origin``)."""
    sessions: BrowserSessions = app.state.browser_sessions
    base: str = app.state.login_base or "http://127.0.0.1"
    return sessions.link(base, scope=scope, next_path=next_path)
