"""EventStream: frames produced by their own task, pings in silence, a slow reader never
holds the cell up (and loses only non-final frames)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from starlette.types import Message

from scratchpad.server.sse import BACKLOG_BYTES, PING, EventStream, encode

CELL = {"type": "cell", "cell": {"status": "ok"}}


async def receive() -> Message:
    await asyncio.Event().wait()
    return {}


async def test_a_quiet_stream_sends_pings_then_the_cell() -> None:
    async def frames() -> AsyncIterator[dict[str, Any]]:
        await asyncio.sleep(0.3)
        yield CELL

    bodies: list[bytes] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            bodies.append(message["body"])

    await EventStream(frames(), ping_s=0.05)({"type": "http"}, receive, send)
    assert bodies[0] == PING and PING in bodies[:-2]
    assert bodies[-2:] == [encode(CELL), b""]


async def test_a_client_that_does_not_read_never_holds_the_frames_up() -> None:
    produced = asyncio.Event()
    chunk = {"type": "output", "stream": "stdout", "text": "x" * (1024 * 1024)}
    count = 3 * BACKLOG_BYTES // (1024 * 1024)

    async def frames() -> AsyncIterator[dict[str, Any]]:
        for _ in range(count):
            yield chunk
        yield CELL
        produced.set()

    reading = asyncio.Event()
    bodies: list[bytes] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            await reading.wait()  # the client reads nothing until the cell has run
            bodies.append(message["body"])

    response = asyncio.create_task(EventStream(frames())({"type": "http"}, receive, send))
    await asyncio.wait_for(produced.wait(), 10)
    reading.set()
    await asyncio.wait_for(response, 10)
    assert bodies[-2:] == [encode(CELL), b""]
    outputs = [body for body in bodies if body == encode(chunk)]
    assert 0 < len(outputs) < count  # the lagging client lost output frames, not the cell
