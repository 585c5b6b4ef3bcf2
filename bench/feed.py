"""Live feed benchmark: a pad's ``1+1`` round trip and a 1 MiB print with nobody watching
and with a watcher reading every event, measured in the same run.

Run with ``.venv/bin/python bench/feed.py``; prints medians, asserts nothing. Set
``PYTHONPATH`` to another checkout's ``src`` to get its "nobody watching" figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import statistics
import tempfile
import time
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.runtime.manager import ScratchpadManager

ROUND_TRIPS = 3000
PRINTS = 30
PRINT_ONE_MIB = "print('x' * (1024 * 1024 - 1))"


async def timed(pad: object, code: str, count: int) -> float:
    """Median seconds of ``count`` runs of ``code``."""
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        await pad.execute(code)  # type: ignore[attr-defined]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


async def drain(subscription: object, seen: list[int]) -> None:
    async for _ in subscription:  # type: ignore[attr-defined]
        seen[0] += 1


async def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        manager = ScratchpadManager(settings=Settings(home=Path(home)))
        pad = await manager.get_or_create("bench")
        await timed(pad, "1+1", 300)  # warm up
        rows = [("nobody watching", await timed(pad, "1+1", ROUND_TRIPS),
                 await timed(pad, PRINT_ONE_MIB, PRINTS))]  # fmt: skip
        watch = getattr(manager, "watch", None)
        if watch is not None:
            seen = [0]
            subscription = watch("bench").subscribe()
            reader = asyncio.create_task(drain(subscription, seen))
            rows.append(("one watcher", await timed(pad, "1+1", ROUND_TRIPS),
                         await timed(pad, PRINT_ONE_MIB, PRINTS)))  # fmt: skip
            subscription.close()
            await reader
            print(f"(the watcher read {seen[0]} events)")
        await manager.close_all()
    print(f"{'':18} {'1+1 round trip':>16} {'print 1 MiB':>14}")
    for label, rtt, big in rows:
        print(f"{label:18} {rtt * 1e6:13.1f} µs {big * 1e3:11.2f} ms")


def micro() -> None:
    """What the runtime's calls into its watch cost per cell, without a kernel."""
    import timeit

    from scratchpad.runtime.cell import Cell, OutputEvent
    from scratchpad.runtime.watch import PadWatch

    watch, cell = PadWatch("micro"), Cell(code="1+1")
    output = [OutputEvent("stdout", "hello\n"), cell]

    def one_cell(items: list[object]) -> None:
        watch.queued(cell)
        watch.started(cell)
        watch.seen(items)  # type: ignore[arg-type]
        watch.recorded(cell)

    count = 100_000
    cases: list[tuple[str, list[object]]] = [("1+1", [cell]), ("one print", list(output))]
    for label, items in cases:
        spent = timeit.timeit(functools.partial(one_cell, items), number=count)
        print(f"watch calls per cell, nobody watching, {label}: {spent / count * 1e6:.2f} µs")


if __name__ == "__main__":
    with contextlib.suppress(ImportError):  # another checkout: no watch there
        micro()
    asyncio.run(main())
