"""Event layer benchmark: what building and encoding a pad's events costs the server, per
frame, without a kernel: execute-stream frames of a cell printing many pieces (plain and
``stream_output`` clients) and a pad feed's events with one subscriber; beside them, the
reference: the same frames built by hand as dicts and encoded, in the same run.

Run with ``.venv/bin/python bench/events.py``; prints medians of several runs, asserts
nothing. Set ``PYTHONPATH`` to another checkout's ``src`` to compare with its figures.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

from scratchpad.runtime.cell import Cell, OutputEvent, ProgressEvent
from scratchpad.runtime.watch import PadWatch
from scratchpad.server.frames import cell_frames
from scratchpad.server.sse import encode

PIECES = 20_000
RUNS = 7


class Pad:
    name = "bench"

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    async def execute_streaming(self, code: str, **options: Any) -> AsyncIterator[Any]:
        for item in self.items:
            yield item


async def stream(items: list[Any], stream_output: bool) -> int:
    frames = cell_frames(
        Pad(items),  # type: ignore[arg-type]
        code="c",
        description="",
        estimated_time="",
        estimated_seconds=0.0,
        timeout_s=None,
        cell_id="c",
        stream_output=stream_output,
    )
    return sum([len(encode(frame)) async for frame in frames])


def median_us(samples: list[float], count: int) -> str:
    return f"{statistics.median(samples) / count * 1e6:8.2f} µs"


async def main() -> None:
    cell = Cell(code="1+1", result="2", id="c", number=1)
    pieces = [OutputEvent("stdout", f"line {i}\n") for i in range(PIECES)]
    rows: list[tuple[str, str]] = []
    for label, items, stream_output in (
        ("1+1, plain client, per cell", [cell], False),
        ("1+1 with a progress, per cell", [ProgressEvent("p"), cell], False),
        ("many prints, stream_output, per frame", [*pieces, cell], True),
    ):
        samples = []
        for _ in range(RUNS):
            start = time.perf_counter()
            await stream(items, stream_output)
            samples.append(time.perf_counter() - start)
        rows.append((f"execute-stream: {label}", median_us(samples, len(items))))
    samples = []
    for _ in range(RUNS):
        watch = PadWatch("bench")
        subscription = watch.subscribe(max_events=10 * PIECES)
        start = time.perf_counter()
        watch.queued(cell)
        watch.started(cell)
        watch.seen(pieces)  # type: ignore[arg-type]
        watch.recorded(cell)
        subscription.close()
        sent = [encode(event) async for event in subscription]
        samples.append(time.perf_counter() - start)
        assert len(sent) == PIECES + 3
    rows.append(("pad feed, one subscriber, per event", median_us(samples, PIECES + 3)))
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        for piece in pieces:
            encode({"type": "output", "id": "c", "stream": piece.stream, "text": piece.text})
        samples.append(time.perf_counter() - start)
    rows.append(
        ("reference: a dict built by hand and encoded, per frame", median_us(samples, PIECES))
    )
    for label, figure in rows:
        print(f"{label:56} {figure}")


if __name__ == "__main__":
    asyncio.run(main())
