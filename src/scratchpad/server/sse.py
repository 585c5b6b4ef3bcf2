"""Server-sent events for ``execute-stream``, as a lean ASGI response.

Each frame is ``data: <json>`` and a blank line. The frames are produced by their own task and
sent from a queue, so a client that reads slowly (or not at all) never holds the cell up: the
cell runs to its end and is recorded whatever the client does. While the client lags by more
than ``BACKLOG_BYTES``, progress/output/display frames are dropped (the final cell carries the
whole output); the cell or error frame is always sent. A comment line every ``PING_S`` seconds
of silence keeps proxies and client read timeouts from cutting a quiet, long cell.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

PING_S = 15.0
BACKLOG_BYTES = 8 * 1024 * 1024
PING = b": ping\n\n"
FINAL_TYPES = frozenset({"cell", "error"})

log = logging.getLogger(__name__)
_running: set[asyncio.Task[None]] = set()  # producers outlive a client that went away


class EventStream(Response):
    """A stream of frames (a Response, so FastAPI passes it through untouched)."""

    def __init__(self, frames: AsyncIterator[dict[str, Any]], *, ping_s: float = PING_S) -> None:
        # Not Response.__init__: it would add a content-length. no-store: nothing may cache a
        # cell; x-accel-buffering: proxies must not hold frames back.
        self.frames = frames
        self.ping_s = ping_s
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-store"),
            (b"x-accel-buffering", b"no"),
        ]
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._backlog = 0
        self._dropped = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        producer = asyncio.create_task(self._produce())
        _running.add(producer)
        producer.add_done_callback(_running.discard)
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        while (data := await self._next()) is not None:
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _next(self) -> bytes | None:
        try:
            async with asyncio.timeout(self.ping_s):  # no task per frame, unlike wait_for
                data = await self._queue.get()
        except TimeoutError:
            return PING
        if data is not None:
            self._backlog -= len(data)
        return data

    async def _produce(self) -> None:
        try:
            async for message in self.frames:
                data = encode(message)
                if self._backlog > BACKLOG_BYTES and message.get("type") not in FINAL_TYPES:
                    self._dropped += 1
                    continue
                self._backlog += len(data)
                self._queue.put_nowait(data)
        except Exception:  # the frames generator reports pad errors itself; this is a bug
            log.exception("an execute-stream producer failed")
            self._queue.put_nowait(encode({"type": "error", "error": "internal server error"}))
        finally:
            if self._dropped:
                log.info("a slow client missed %d stream frames", self._dropped)
            self._queue.put_nowait(None)


def encode(message: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(message, ensure_ascii=False).encode() + b"\n\n"
