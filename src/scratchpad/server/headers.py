"""Security headers on every response, as plain ASGI (added to the response's start message,
so streams, SSE and the MCP endpoint pass untouched): the UI's pages may load only the
server's own scripts and styles and connect only to it, nobody may frame them, and no URL
(a login link holds a token) leaks as a referrer. A route that sets its own
``Content-Security-Policy`` (a user's file shown sandboxed) keeps it, and may then be framed
by the server's own pages only.

:func:`content_disposition` is the one way a download names its file."""

from __future__ import annotations

from urllib.parse import quote

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; frame-src 'self' blob: data:; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)
COMMON = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
OURS = [(b"content-security-policy", CSP.encode()), (b"x-frame-options", b"DENY")]
ROUTES_OWN = [(b"x-frame-options", b"SAMEORIGIN")]


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = with_security_headers(list(message.get("headers", [])))
            await send(message)

        await self.app(scope, receive, send_with_headers)


def with_security_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` plus ours, none of them replacing one the route set."""
    present = {name.lower() for name, _ in headers}
    extra = COMMON + (ROUTES_OWN if b"content-security-policy" in present else OURS)
    return headers + [(name, value) for name, value in extra if name not in present]


def content_disposition(filename: str, *, inline: bool = False) -> str:
    """The ``Content-Disposition`` of a download named ``filename`` (RFC 6266): the name in
    UTF-8 as ``filename*`` (RFC 8187), and an ASCII stand-in as ``filename`` for clients that
    know only that. Header values travel as Latin-1 bytes, so a name never goes in as it is
    (``данные.ipynb`` would fail the answer). A name, never a path: '/' and '\\' become '_'."""
    leaf = filename.replace("/", "_").replace("\\", "_")
    fallback = "".join(ch if " " <= ch <= "~" and ch not in '"\\%' else "_" for ch in leaf)
    encoded = quote(leaf, safe="", errors="replace")
    kind = "inline" if inline else "attachment"
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"
