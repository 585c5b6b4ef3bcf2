"""The server's gate, as plain ASGI: the bearer key on every HTTP request but the open paths,
and the request-size limit. Plain ASGI because Starlette's ``BaseHTTPMiddleware`` costs a task
group and a stream copy per request, a large share of a tiny cell's round trip. (CORS
preflights are answered by the CORS middleware outside this one.)"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote, unquote

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scratchpad.server.auth import authorized
from scratchpad.vault.scrub import scrub

OPEN_PATHS = frozenset({"/healthz"})
OPEN_PREFIXES = ("/static/",)  # the web UI's files: code and styles, no data
NAMED_PATHS = "/v1/pads/"  # below it, a path segment is a pad name that may hold '/'


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
    ) -> None:
        self.app = app
        self.api_key = api_key
        self.limit = limit
        self.streamed = streamed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        own_limit = self.streamed(scope) if self.streamed is not None else None
        refusal = self._refusal(scope["path"], headers, own_limit or self.limit)
        if refusal is None and own_limit is None and b"content-length" not in headers:
            receive, refusal = await self._read_whole_body(receive)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, path: str, headers: dict[bytes, bytes], limit: int) -> JSONResponse | None:
        if path not in OPEN_PATHS and not path.startswith(OPEN_PREFIXES):
            header = headers.get(b"authorization", b"").decode("latin-1")
            if not authorized(header, self.api_key):
                refusal = error(
                    401,
                    "missing or wrong API key: send 'Authorization: Bearer <key>'",
                    "Unauthorized",
                )
                refusal.headers["www-authenticate"] = 'Bearer realm="scratchpad"'
                return refusal
        length = headers.get(b"content-length", b"").decode("latin-1")
        if length.isdigit() and int(length) > limit:
            return self._too_large(length, limit)
        return None

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


def error(status: int, message: str, kind: str) -> JSONResponse:
    """The one shape of every error answer: ``{"error": message, "type": kind}``, the kind
    being a class of the error tree or an HTTP-level refusal (Unauthorized, NotFound, ...).
    The message is scrubbed: errors quote what went wrong, which may hold a secret."""
    return JSONResponse({"error": scrub(message), "type": kind}, status_code=status)


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
            raw_path = raw.decode("latin-1").split("?", 1)[0]
            segments = [
                quote(unquote(part, errors="replace"), safe="") for part in raw_path.split("/")
            ]
            scope = {**scope, "path": "/".join(segments)}
        await self.app(scope, receive, send)


def segment_name(segment: str) -> str:
    """A pad name from a path segment left encoded by :class:`EncodedNames`."""
    return unquote(segment)
