"""Server-sent events for ``execute-stream``, as a lean ASGI response.

Each frame is ``data: <json>`` and a blank line: a typed event (scratchpad/events.py) as
:func:`~scratchpad.events.wire` gives it, or a dict. The frames are produced by their own task and
sent from a queue, so a client that reads slowly (or not at all) never holds the cell up: the
cell runs to its end and is recorded whatever the client does. While the client lags by more
than ``BACKLOG_BYTES``, progress/output/display frames are dropped (the final cell carries the
whole output); the cell or error frame is always sent. A comment line every ``PING_S`` seconds
of silence keeps proxies and client read timeouts from cutting a quiet, long cell.

A client that goes away before the final frame is noticed at once (the ASGI ``receive``
channel says so) and ``on_disconnect`` runs: the caller decides what happens to the cell.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic import BaseModel
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from scratchpad.events import wire
from scratchpad.runtime.cell import rough_chars
from scratchpad.text import clean_text

PING_S = 15.0
BACKLOG_BYTES = 8 * 1024 * 1024
PING = b": ping\n\n"
GONE = b""  # queued by the disconnect watcher: stop sending
FINAL_TYPES = frozenset({"cell", "error"})
BIG_FRAME_CHARS = 256 * 1024

log = logging.getLogger(__name__)
_running: set[asyncio.Task[None]] = set()  # producers outlive a client that went away


class EventStream(Response):
    """A stream of frames (a Response, so FastAPI passes it through untouched)."""

    def __init__(
        self,
        frames: AsyncIterator[BaseModel] | AsyncIterator[dict[str, Any]],
        *,
        ping_s: float = PING_S,
        on_disconnect: Callable[[], None] | None = None,
        final_types: frozenset[str] = FINAL_TYPES,
        named: bool = False,
        pace_bytes: int | None = None,
        numbered: bool = False,
        event_id: Callable[[dict[str, Any]], str] | None = None,
    ) -> None:
        # Not Response.__init__: it would add a content-length. no-store: nothing may cache a
        # cell; x-accel-buffering: proxies must not hold frames back.
        self.frames = frames
        self.ping_s = ping_s
        self.on_disconnect = on_disconnect
        self.final_types = final_types
        self.named = named  # each frame also says its type on an ``event:`` line
        # A stream that must not miss frames (a live feed): the next frame is taken only
        # while the client lags by at most ``pace_bytes``, so a slow client holds its frames
        # back in their source (which bounds them its own way), and none is ever dropped.
        self.pace_bytes = pace_bytes
        self.numbered = numbered  # an ``id:`` line on each frame: 0, 1, 2, ...
        self.event_id = event_id  # or the ``id:`` each frame names (a resumable stream)
        self._sequence = 0
        self._caught_up = asyncio.Event()
        self._gone = False
        self._final_queued = False
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
        watcher = asyncio.create_task(self._watch(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            while (data := await self._next()) is not None:
                if data is GONE:
                    return
                await send({"type": "http.response.body", "body": data, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()

    async def _watch(self, receive: Receive) -> None:
        """Wait for the client to go away; before the final frame, that ends the stream."""
        while (await receive())["type"] != "http.disconnect":
            pass
        self._queue.put_nowait(GONE)
        self._gone = True
        self._caught_up.set()
        if self.on_disconnect is not None and not self._final_queued:
            self.on_disconnect()

    async def _next(self) -> bytes | None:
        try:
            async with asyncio.timeout(self.ping_s):  # no task per frame, unlike wait_for
                data = await self._queue.get()
        except TimeoutError:
            return PING
        if data:
            self._backlog -= len(data)
            if self.pace_bytes is not None and self._backlog <= self.pace_bytes:
                self._caught_up.set()
        return data

    async def _produce(self) -> None:
        try:
            async for frame in self.frames:
                message = wire(frame) if isinstance(frame, BaseModel) else frame
                final = message.get("type") in self.final_types
                if self._backlog > BACKLOG_BYTES and not final and self.pace_bytes is None:
                    self._dropped += 1
                    continue
                if _big(message):  # a cell of many MB: encode it off the loop
                    data = await asyncio.to_thread(self._encode, message)
                else:
                    data = self._encode(message)
                self._final_queued = self._final_queued or final
                self._backlog += len(data)
                self._queue.put_nowait(data)
                if not await self._paced():
                    break
        except Exception:  # the frames generator reports pad errors itself; this is a bug
            log.exception("an execute-stream producer failed")
            self._final_queued = True
            self._queue.put_nowait(encode({"type": "error", "error": "internal server error"}))
        finally:
            aclose = getattr(self.frames, "aclose", None)
            if aclose is not None:  # a feed left early: its generator lets go of its source
                await aclose()
            if self._dropped:
                log.info("a slow client missed %d stream frames", self._dropped)
            self._queue.put_nowait(None)

    async def _paced(self) -> bool:
        """Wait while a paced stream's client lags; False once its client went away (other
        streams go on: their producers outlive the client)."""
        if self.pace_bytes is None:
            return True
        while self._backlog > self.pace_bytes:
            if self._gone:
                return False
            self._caught_up.clear()
            await self._caught_up.wait()
        return not self._gone

    def _encode(self, message: dict[str, Any]) -> bytes:
        data = encode(message, self.named)
        if self.numbered:
            data = b"id: %d\n" % self._sequence + data
            self._sequence += 1
        elif self.event_id is not None:
            data = b"id: " + clean_text(self.event_id(message)).encode() + b"\n" + data
        return data


def _big(message: dict[str, Any]) -> bool:
    cell = message.get("cell")
    if not isinstance(cell, dict):
        return False
    return rough_chars(cell) > BIG_FRAME_CHARS


def encode(event: dict[str, Any] | BaseModel, named: bool = False) -> bytes:
    """One frame (``named``: with an ``event:`` line of its type); text that cannot be UTF-8
    (a lone surrogate that slipped past the core's cleaning) becomes U+FFFD rather than
    breaking the stream."""
    message = wire(event) if isinstance(event, BaseModel) else event
    text = json.dumps(message, ensure_ascii=False)
    try:
        data = text.encode()
    except UnicodeEncodeError:
        data = clean_text(text).encode()
    frame = b"data: " + data + b"\n\n"
    kind = message.get("type")
    if named and isinstance(kind, str) and kind.isprintable():
        frame = b"event: " + clean_text(kind).encode() + b"\n" + frame
    return frame
