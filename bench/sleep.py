"""Sleep benchmark: what an asleep pad holds, the pad list with 1000 asleep pads, and the
first cell of a random one of them (its wake), beside a warm start of the same pad measured
in the same run.

Run with ``.venv/bin/python bench/sleep.py`` (``make bench`` does); prints medians, asserts
only what the targets call exact (an asleep pad holds no process). ``--pads N`` changes the
1000; ``--restart-pads N`` the 50 pads of a real server killed and started again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from scratchpad.config import Settings
from scratchpad.runtime import venv
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager, pad_root
from scratchpad.runtime.padinfo import HISTORY
from scratchpad.runtime.padstate import STATE_FILE
from scratchpad.runtime.proctree import group_alive, tree_rss

OWN_FILES = (HISTORY, STATE_FILE)  # each pad's own; the venv itself is hard-linked


def clone(seed: Path, root: Path, name: str) -> None:
    """Another asleep pad like ``seed``: its venv hard-linked, its history and state copied."""
    shutil.copytree(seed, root, symlinks=True, copy_function=os.link)
    for own in (*OWN_FILES, venv.NAME_FILE):
        (root / own).unlink(missing_ok=True)
    for own in OWN_FILES:
        if (seed / own).exists():
            shutil.copy2(seed / own, root / own)
    venv.record_name(root, name)


async def first_cell_ms(manager: ScratchpadManager, name: str) -> float:
    start = time.perf_counter()
    pad = await manager.get_or_create(name)
    cell = await pad.execute("1+1")
    elapsed = (time.perf_counter() - start) * 1000
    assert cell.result == "2", cell.error
    return elapsed


async def measure(count: int, home: Path, repeats: int) -> dict[str, float]:
    settings = Settings(home=home)
    results: dict[str, float] = {}
    async with ScratchpadManager(settings=settings) as manager:
        seed = await manager.get_or_create("seed")
        assert isinstance(seed, LocalRuntime) and seed.pid is not None
        await seed.execute("x = 1")
        leader = seed.pid
        assert await manager.sleep_idle(time.time() + 10 * settings.sleep_after_s) == ["seed"]
        results["processes"] = float(group_alive(leader))  # 0: nothing of its group is left
        results["rss"] = float(tree_rss(leader) or 0)
        assert results["processes"] == 0 and manager.names() == []

        warm = []  # the anchor: a closed pad's next first cell
        for _ in range(repeats):
            pad = await manager.get_or_create("seed")
            await pad.execute("1+1")
            await manager.close("seed")
            warm.append(await first_cell_ms(manager, "seed"))
            await manager.close("seed")
        results["warm"] = statistics.median(warm)

        woken = []
        for _ in range(repeats):
            await manager.sleep_idle(time.time() + 10 * settings.sleep_after_s)
            woken.append(await first_cell_ms(manager, "seed"))
        results["wake"] = statistics.median(woken)
        await manager.sleep_idle(time.time() + 10 * settings.sleep_after_s)

    root = pad_root(settings, "seed")
    names = [f"asleep-{index:04d}" for index in range(count)]
    for name in names:
        clone(root, pad_root(settings, name), name)

    async with ScratchpadManager(settings=settings) as fresh:  # a server just started
        start = time.perf_counter()
        listed = await fresh.list_pads()
        results["list_first"] = (time.perf_counter() - start) * 1000
        assert sum(info.status == "asleep" for info in listed) == count + 1
        lists = []
        for _ in range(repeats):
            start = time.perf_counter()
            await fresh.list_pads()
            lists.append((time.perf_counter() - start) * 1000)
        results["list"] = statistics.median(lists)
        results["random"] = await first_cell_ms(fresh, random.choice(names))
    return results


def restart(count: int, home: Path) -> dict[str, float]:
    """A real ``scratchpad serve`` killed (-9) with ``count`` pads that each ran a cell
    (variables checkpointed), then started again on the same home: how long until it
    answers, the pad list (every pad asleep), and a random pad's first cell (its wake and
    restore) over HTTP."""
    from server import KEY, server  # bench/server.py: this script's directory is on sys.path

    headers = {"Authorization": f"Bearer {KEY}"}
    names = [f"r{index:03d}" for index in range(count)]

    def cell(url: str, name: str, code: str) -> dict[str, object]:
        answer = httpx.post(
            f"{url}/scratchpad/execute-stream", headers=headers, timeout=120,
            json={"name": name, "code": code},
        )  # fmt: skip
        final = json.loads(answer.text.strip().split("\n\n")[-1].removeprefix("data: "))
        return dict(final["cell"])

    with server(home) as (url, process):
        for name in names:
            assert cell(url, name, "x = list(range(100))\ny = {'a': 1}")["status"] == "ok"
        process.kill()
        process.wait()
    results: dict[str, float] = {}
    start = time.perf_counter()
    with server(home.parent / "empty") as _:  # the anchor: a home with no pad
        results["up_empty"] = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    with server(home) as (url, _):
        results["up"] = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        pads = httpx.get(f"{url}/v1/pads", headers=headers, timeout=60).json()["pads"]
        results["list"] = (time.perf_counter() - start) * 1000
        assert sum(pad["status"] == "asleep" for pad in pads) == count, pads
        start = time.perf_counter()
        woken = cell(url, random.choice(names), "len(x) + y['a']")
        results["first"] = (time.perf_counter() - start) * 1000
        assert woken["result"] == "101", woken
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pads", type=int, default=1000, help="asleep pads listed")
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--restart-pads", type=int, default=50, help="pads of the restart")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    with tempfile.TemporaryDirectory(prefix="scratchpad-bench-sleep-") as tmp:
        got = asyncio.run(measure(args.pads, Path(tmp), repeats))
    with tempfile.TemporaryDirectory(prefix="scratchpad-bench-restart-") as tmp:
        again = restart(args.restart_pads, Path(tmp) / "home")
    print(f"{os.cpu_count()} CPUs; medians of {repeats} runs")
    rows = [
        ("asleep pad: processes", f"{got['processes']:.0f}", "0"),
        ("asleep pad: resident memory", f"{got['rss']:.0f} B", "0"),
        ("warm start → first result (anchor)", f"{got['warm']:.1f} ms", ""),
        ("wake → first result", f"{got['wake']:.1f} ms", "≤ warm start + 20 ms"),
        (f"list {args.pads + 1} asleep pads, first", f"{got['list_first']:.1f} ms", ""),
        (f"list {args.pads + 1} asleep pads, again", f"{got['list']:.1f} ms", ""),
        (f"first cell of a random one of {args.pads}", f"{got['random']:.1f} ms", "≤ 1 s"),
        ("server start, no pads (anchor)", f"{again['up_empty']:.0f} ms", ""),
        (f"server kill -9, {args.restart_pads} pads: up again", f"{again['up']:.0f} ms", ""),
        (f"  then list the {args.restart_pads} asleep pads", f"{again['list']:.1f} ms", ""),
        ("  then a random one's first cell (restore)", f"{again['first']:.1f} ms", "≤ 1 s"),
    ]
    for label, value, target in rows:
        print(f"{label:42} {value:>12}   {target}")


if __name__ == "__main__":
    main()
