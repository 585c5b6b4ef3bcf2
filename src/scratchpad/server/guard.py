"""The server's gate, as plain ASGI: the bearer key on every HTTP request but the open paths,
and the request-size limit. Plain ASGI because Starlette's ``BaseHTTPMiddleware`` costs a task
group and a stream copy per request, a large share of a tiny cell's round trip."""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from scratchpad.server.auth import authorized

OPEN_PATHS = frozenset({"/healthz"})


class Guard:
    def __init__(self, app: ASGIApp, *, api_key: str, limit: int) -> None:
        self.app = app
        self.api_key = api_key
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> JSONResponse | None:
        headers = dict(scope["headers"])
        preflight = scope["method"] == "OPTIONS" and b"access-control-request-method" in headers
        if scope["path"] not in OPEN_PATHS and not preflight:
            header = headers.get(b"authorization", b"").decode("latin-1")
            if not authorized(header, self.api_key):
                return error(401, "missing or wrong API key: send 'Authorization: Bearer <key>'")
        length = headers.get(b"content-length", b"").decode("latin-1")
        if length.isdigit() and int(length) > self.limit:
            return error(413, f"request body of {length} bytes is over the {self.limit}-byte limit")
        return None


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)
