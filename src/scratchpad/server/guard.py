"""The server's gate, as plain ASGI: who sends a request (the bearer key, or a browser tab's
session), what a browser may do, and the request-size limit. Plain ASGI because Starlette's
``BaseHTTPMiddleware`` costs a task group and a stream copy per request, a large share of a
tiny cell's round trip; the bearer path costs one key comparison, as before. (CORS preflights
are answered by the CORS middleware outside this one.)

Who it is goes to ``scope["state"]["auth"]`` (``request.state.auth``): ``"bearer"``, ``"all"``
or ``"form:<id>"`` (see :mod:`scratchpad.server.browser_auth`), and a browser session's id to
``scope["state"]["session"]``; absent on an open path. A browser session comes in the
``X-Scratchpad-Session`` header or, for a download the browser fetches without script, in a
signed URL; cookies are never read (browsers send them to every port of the host). Requests
without the key must name the server in ``Host`` (DNS rebinding); a session's state changes
must come from the server's own pages (``Origin``). The pages themselves are open: they are
code and hold no data, which their script reads with the tab's session. WebSocket
connections are refused outright: no route takes one, and none would pass these checks."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qsl, quote, unquote

from pydantic import BaseModel, Field
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scratchpad.errors import ForbiddenError, ScratchpadError, UnauthorizedError, http_status
from scratchpad.scrub import scrub
from scratchpad.server.auth import authorized
from scratchpad.server.browser_auth import (
    FORM_PREFIX,
    SESSION_HEADER,
    SIGNATURE_PARAM,
    BrowserSessions,
    signable,
    signed_target,
)
from scratchpad.server.hosts import OwnHosts, same_origin
from scratchpad.server.pages import login_needed
from scratchpad.wire import wire

OPEN_PATHS = frozenset({"/healthz", "/login", "/logout", "/", "/docs"})
OPEN_PREFIXES = ("/static/", "/connect/")  # the web UI's files and pages: code, no data
NAMED_PATHS = "/v1/pads/"  # below it, a path segment is a pad name that may hold '/'
API_PREFIXES = ("/v1/", "/scratchpad/", "/mcp", "/openapi.json")  # JSON refusals; else HTML
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
BEARER = "bearer"
WS_POLICY_VIOLATION = 1008
WS_REFUSAL = "this server takes no WebSocket connections; use HTTP (SSE for streams)"


class Guard:
    """``streamed(scope)`` names the requests that read their body themselves (uploads): their
    body limit (else None); such a body is neither buffered here nor held to ``limit``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        api_key: str,
        limit: int,
        streamed: Callable[[Scope], int | None] | None = None,
        sessions: BrowserSessions | None = None,
        hosts: OwnHosts | None = None,
    ) -> None:
        self.app = app
        self.api_key = api_key
        self.limit = limit
        self.streamed = streamed
        self.sessions = sessions or BrowserSessions()
        self.hosts = hosts or OwnHosts(None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await _refuse_websocket(receive, send)
            return
        if scope["type"] != "http":  # the lifespan
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        own_limit = self.streamed(scope) if self.streamed is not None else None
        refusal = self._refusal(scope, headers, own_limit or self.limit)
        if refusal is None and own_limit is None and b"content-length" not in headers:
            receive, refusal = await self._read_whole_body(receive)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[bytes, bytes], limit: int) -> Response | None:
        header = headers.get(b"authorization", b"").decode("latin-1")
        if authorized(header, self.api_key):
            scope.setdefault("state", {})["auth"] = BEARER
        else:
            refusal = self._browser_refusal(scope, headers)
            if refusal is not None:
                return refusal
        length = headers.get(b"content-length", b"").decode("latin-1")
        if length.isdigit() and int(length) > limit:
            return self._too_large(length, limit)
        return None

    def _browser_refusal(self, scope: Scope, headers: dict[bytes, bytes]) -> Response | None:
        """A request without the key: a browser's, or anyone's. Without a session only the
        open paths answer; those and every session's request must name this server in
        Host; a session may do what its scope allows, state changes from the server's own
        pages only."""
        path: str = scope["path"]
        if path == "/healthz":
            return None
        who = self._session(scope, headers)
        is_open = path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)
        if who is None and not is_open:
            return _unauthorized(path)  # nothing to protect, whatever the Host
        host = headers.get(b"host", b"").decode("latin-1")
        if not self.hosts.allows(host):
            return refusal(ForbiddenError(self.hosts.refusal(host)))
        if who is None:
            return None
        session_id, granted = who
        state = scope.setdefault("state", {})
        state["session"], state["auth"] = session_id, granted
        origin = headers.get(b"origin", b"").decode("latin-1")
        if scope["method"] in UNSAFE_METHODS and not same_origin(origin, host):
            return _cross_site(origin)
        if granted.startswith(FORM_PREFIX) and not is_open:
            return _form_refusal(granted[len(FORM_PREFIX) :], scope["method"], path)
        return None

    def _session(self, scope: Scope, headers: dict[bytes, bytes]) -> tuple[str, str] | None:
        """(id, scope) of the live browser session the request comes with: the session
        header, or a signed URL on a GET of a download (see ``browser_auth.SIGNABLE``)."""
        token = headers.get(SESSION_HEADER.encode(), b"").decode("latin-1")
        if token:
            granted = self.sessions.scope_of(token)
            return None if granted is None else (token, granted)
        if scope["method"] not in ("GET", "HEAD") or not signable(scope["path"]):
            return None
        query = scope.get("query_string", b"").decode("latin-1")
        pairs = parse_qsl(query, keep_blank_values=True)
        signatures = [value for name, value in pairs if name == SIGNATURE_PARAM]
        if len(signatures) != 1:
            return None
        return self.sessions.signed(signatures[0], signed_target(scope["path"], pairs))

    async def _read_whole_body(self, receive: Receive) -> tuple[Receive, JSONResponse | None]:
        """A body of unknown length (chunked) is read here, up to the limit, then replayed."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return receive, None  # the client went away; the app sees it too
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                return receive, self._too_large(f"more than {self.limit}", self.limit)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return replay, None

    def _too_large(self, length: str, limit: int) -> JSONResponse:
        message = f"request body of {length} bytes is over the {limit}-byte limit"
        return error(413, message, "InvalidInputError")


async def _refuse_websocket(receive: Receive, send: Send) -> None:
    """No route here speaks WebSocket, and none passes this gate: a WebSocket handshake is
    closed with 1008 (policy violation) before anything else sees it, which the server
    answers as HTTP 403, whatever WebSocket library it may have."""
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": WS_POLICY_VIOLATION, "reason": WS_REFUSAL})


def _unauthorized(path: str) -> Response:
    if not path.startswith(API_PREFIXES):
        return login_needed(path)  # a page: a person reads it
    answer = refusal(
        UnauthorizedError(
            "missing or wrong API key: send 'Authorization: Bearer <key>' (browsers: log in "
            "with the link `scratchpad login` prints)"
        )
    )
    answer.headers["www-authenticate"] = 'Bearer realm="scratchpad"'
    return answer


def _cross_site(origin: str) -> Response:
    sender = f"a page at {origin[:100]!r}" if origin else "a request without an Origin header"
    message = (
        f"refused: {sender} tried to change something with this browser's session; only the "
        "server's own pages may (API clients: send 'Authorization: Bearer <key>' instead)"
    )
    return refusal(ForbiddenError(message))


def _form_refusal(form_id: str, method: str, path: str) -> Response | None:
    """What a session made for one credential form may reach: that form, and submitting it."""
    reading = method in ("GET", "HEAD")
    if reading and path == f"/v1/forms/{form_id}":
        return None
    if reading and path.startswith(f"/v1/forms/{form_id}/"):
        return None
    if method == "POST" and path == "/v1/datavault/submissions":
        return None
    submission = path.removeprefix("/v1/datavault/submissions/")
    if reading and submission != path and submission and "/" not in submission:
        return None
    message = (
        f"this browser session may only fill in form {form_id!r}; open the login link printed "
        "by `scratchpad serve` for the rest"
    )
    return refusal(ForbiddenError(message))


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer (server/guard.py ``error()``)."""

    error: str = Field(description="What went wrong and what to do (secrets scrubbed).")
    type: str = Field(
        description="The error class (InvalidInputError, PadNotFoundError, ...) or an HTTP-level "
        "refusal (NotFound, MethodNotAllowed, InternalError)."
    )


def error(status: int, message: str, kind: str) -> JSONResponse:
    """The one shape of every error answer: ``{"error": message, "type": kind}``, the kind
    being a class of the error tree or an HTTP-level refusal (NotFound, MethodNotAllowed, ...).
    The message is scrubbed: errors quote what went wrong, which may hold a secret."""
    return JSONResponse(wire(ErrorBody(error=scrub(message), type=kind)), status_code=status)


def refusal(exc: ScratchpadError) -> JSONResponse:
    """The error answer of ``exc``: its class's status and name, so a client raises the same
    class (:func:`scratchpad.errors.error_from_http`)."""
    return error(http_status(exc), str(exc), type(exc).__name__)


class EncodedNames:
    """Pad names may hold '/' ('data/analysis'): clients send it as %2F, and routing must not
    split there. Below ``/v1/pads/`` the path is rebuilt from the raw one with each segment
    decoded except '/' and '%' (left as %2F, %25): route parameters then hold one segment,
    and :func:`segment_name` decodes it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path")
        if scope["type"] == "http" and raw and scope["path"].startswith(NAMED_PATHS):
            scope = {**scope, "path": canonical_path(raw.decode("latin-1").split("?", 1)[0])}
        await self.app(scope, receive, send)


def canonical_path(raw_path: str) -> str:
    """A path below ``/v1/pads/`` as routes see it: each segment decoded, then encoded whole
    (``/`` and ``%`` inside a segment stay ``%2F`` and ``%25``)."""
    return "/".join(quote(unquote(part, errors="replace"), safe="") for part in raw_path.split("/"))


def segment_name(segment: str) -> str:
    """A pad name from a path segment left encoded by :class:`EncodedNames`."""
    return unquote(segment)
