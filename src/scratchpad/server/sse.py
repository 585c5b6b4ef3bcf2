"""Server-sent events for ``execute-stream``, as a lean ASGI response.

Each frame is ``data: <json>`` and a blank line, sent as soon as it exists. No task group per
response: when the client goes away the server's sends become no-ops and the cell still runs
to its end, so it is recorded (the protocol's promise), without watching for a disconnect.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send


class EventStream(Response):
    """A stream of frames (a Response, so FastAPI passes it through untouched)."""

    def __init__(self, frames: AsyncIterator[dict[str, Any]]) -> None:
        # Not Response.__init__: it would add a content-length. no-store: nothing may cache a
        # cell; x-accel-buffering: proxies must not hold frames back.
        self.frames = frames
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-store"),
            (b"x-accel-buffering", b"no"),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        await send(start)
        async for message in self.frames:
            await send({"type": "http.response.body", "body": encode(message), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def encode(message: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(message, ensure_ascii=False).encode() + b"\n\n"
