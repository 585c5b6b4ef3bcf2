"""Checkpoint benchmark: what checkpoints add to a cell, and a restore after a kernel death,
each beside the same thing with checkpoints off, measured in the same run.

Run with ``make bench``. Prints medians of repeated runs; nothing here is asserted.
``--quick`` uses fewer repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.runtime import checkpoint
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager

TEN_VARS = "\n".join(f"v{i} = [{{'k': {i}, 'n': n}}, 'text {i}', {i}.5]" for i in range(10))
BIG = "import os\nbig = os.urandom(50 << 20)"  # random: the slowest bytes to search


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def timed(pad: LocalRuntime, code: str) -> float:
    start = time.perf_counter()
    cell = await pad.execute(code)
    took = time.perf_counter() - start
    assert cell.status == "ok", cell.error
    return took


async def wait_saved(pad: LocalRuntime, number: int) -> None:
    head = checkpoint.directory(pad.root) / "HEAD"
    while not (head.is_file() and head.read_text() == str(number)):  # noqa: ASYNC110
        await asyncio.sleep(0.001)


async def kill(pad: LocalRuntime) -> None:
    pid = pad.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    while os.path.exists(f"/proc/{pid}"):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            break
        if state in ("Z", "X"):
            break
        await asyncio.sleep(0.001)


async def measure(settings: Settings, repeats: int, workspace: Path) -> dict[str, list[float]]:
    """Two pads side by side, checkpoints on and off, their cells interleaved (so the noise
    of a shared machine falls on both alike)."""
    off_settings = settings.model_copy(update={"checkpoint_pad_mb": 0})
    managers = {
        "on": ScratchpadManager(workspace=workspace, settings=settings),
        "off": ScratchpadManager(workspace=workspace, settings=off_settings),
    }
    samples: dict[str, list[float]] = {
        f"{key} {side}": []
        for key in ("ten", "nothing", "restore", "big", "after big")
        for side in managers
    }
    try:
        pads: dict[str, LocalRuntime] = {}
        for side, manager in managers.items():
            pad = await manager.get_or_create(f"bench-{side}")
            assert isinstance(pad, LocalRuntime)
            await pad.execute(f"n = 0\n{TEN_VARS}")  # the serializers imported once
            pads[side] = pad
        for index in range(repeats):
            for side, pad in pads.items():
                samples[f"ten {side}"].append(await timed(pad, f"n = {index}\n{TEN_VARS}"))
                samples[f"nothing {side}"].append(await timed(pad, "1+1"))
        for _ in range(max(3, repeats // 8)):  # the server scans the new blob meanwhile
            for side, pad in pads.items():
                samples[f"big {side}"].append(await timed(pad, BIG))
                samples[f"after big {side}"].append(await timed(pad, "1+1"))
            for pad in pads.values():
                await pad.execute("del big")
        for _ in range(max(3, repeats // 4)):
            for side, pad in pads.items():
                await pad.execute(f"n = -1\n{TEN_VARS}")
                if side == "on":
                    await wait_saved(pad, pad.cells[-1].number)
                await kill(pad)
                samples[f"restore {side}"].append(await timed(pad, "'v9' in dir()"))
        return samples
    finally:
        for manager in managers.values():
            await manager.close_all()


async def main(repeats: int) -> None:
    with tempfile.TemporaryDirectory() as place:
        root = Path(place)
        (root / "ws").mkdir()
        samples = await measure(Settings(home=root / "home"), repeats, root / "ws")
    rows = [
        ("cell setting 10 small variables", "ten", "<= 5 ms added"),
        ("cell `1+1` (changed nothing)", "nothing", "<= 0.2 ms added"),
        ("kill -9, then first result (restore of 10 vars)", "restore", "<= fresh + 20 ms"),
        ("cell setting one 50 MB bytes value (random)", "big", ""),
        ("`1+1` right after it (its blob scanned meanwhile)", "after big", ""),
    ]
    print(f"{'metric (medians)':52} {'checkpoints':>12} {'off':>10} {'added':>10}  target")
    for label, key, target in rows:
        on, off = median_ms(samples[f"{key} on"]), median_ms(samples[f"{key} off"])
        print(f"{label:52} {on:9.2f} ms {off:7.2f} ms {on - off:7.2f} ms  {target}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    asyncio.run(main(10 if args.quick else 40))
