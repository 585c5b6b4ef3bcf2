"""What confinement costs: a new pad → its first result, a killed kernel → the next result,
and an idle pad's memory, for pads unconfined, under Landlock alone (the confinement pads had
before namespaces) and fully confined (namespaces, a private /dev, the PID namespace, another
identity under root), beside the interpreter's own start, all measured in one run.

Run with ``.venv/bin/python bench/confinement.py [--repeats N]``; prints medians, asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.runtime import confinement, sandboxing
from scratchpad.runtime.limits import proportional, resident
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.proctree import descendants

MODES = {
    "unconfined": {"sandbox": "off"},
    "Landlock alone": {"namespaces": "off"},
    "confined": {},
}


def ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.1f} ms"


async def measure(
    managers: dict[str, ScratchpadManager], repeats: int
) -> dict[str, dict[str, str]]:
    """Every figure for every mode, the modes taking turns within each repeat (so a busy
    moment of the machine weighs on all of them alike)."""
    new_pad: dict[str, list[float]] = {mode: [] for mode in managers}
    restart: dict[str, list[float]] = {mode: [] for mode in managers}
    for manager in managers.values():
        await manager.get_or_create("warmup")  # the probe and the first venv: not counted
    for index in range(repeats):
        for mode, manager in managers.items():
            start = time.perf_counter()
            pad = await manager.get_or_create(f"p{index}")
            await pad.execute("1+1")
            new_pad[mode].append(time.perf_counter() - start)
    for _ in range(repeats):
        for mode, manager in managers.items():
            pad = await manager.get_or_create("p0")
            assert isinstance(pad, LocalRuntime) and pad.pid is not None
            os.kill(pad.pid, 9)
            while pad.kernel is not None and not pad.kernel.channel_closed:  # noqa: ASYNC110
                await asyncio.sleep(0.001)
            start = time.perf_counter()
            cell = await pad.execute("1+1")  # notices the death, starts a kernel, runs
            restart[mode].append(time.perf_counter() - start)
            assert cell.result == "2", cell.error
    await asyncio.sleep(0.5)
    results = {}
    for mode, manager in managers.items():
        pad = await manager.get_or_create("p0")
        assert isinstance(pad, LocalRuntime) and pad.pid is not None
        tree = [pad.pid, *descendants(pad.pid)]
        results[mode] = {
            "new pad → first result": ms(new_pad[mode]),
            "kill + restart → next result": ms(restart[mode]),
            "idle pad: processes": str(len(tree)),
            "idle pad: memory (PSS)": f"{proportional(tree) / (1 << 20):.1f} MiB",
            "idle pad: memory (RSS, summed)": f"{resident(tree) / (1 << 20):.1f} MiB",
        }
    return results


def floor(repeats: int, *flags: str) -> str:
    """An interpreter that starts and does nothing: under any kernel start."""
    samples = []
    for _ in range(repeats * 2):
        start = time.perf_counter()
        subprocess.run([sandboxing.BASE_PYTHON, *flags, "-c", "pass"], check=True)
        samples.append(time.perf_counter() - start)
    return ms(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=9)
    repeats = parser.parse_args().repeats
    with tempfile.TemporaryDirectory(prefix="scratchpad-bench-") as tmp:
        managers: dict[str, ScratchpadManager] = {}
        for mode, changes in MODES.items():
            workspace = Path(tmp) / mode / "ws"
            workspace.mkdir(parents=True)
            settings = Settings(home=Path(tmp) / mode / "home", **changes)  # type: ignore[arg-type]
            managers[mode] = ScratchpadManager(workspace=workspace, settings=settings)
        results = asyncio.run(measure_all(managers, repeats))
        notes = {
            mode: confinement.report(manager.settings)["confinement"]["identity"]
            for mode, manager in managers.items()
        }
    user = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, as {user}; medians of {repeats}"
    )
    print(f"{'':32}" + "".join(f"{mode:>18}" for mode in MODES))
    for metric in results["confined"]:
        print(f"{metric:32}" + "".join(f"{results[mode][metric]:>18}" for mode in MODES))
    print(f"{'floor: python -I -S -c pass':32}{floor(repeats, '-I', '-S'):>18}")
    print(f"{'floor: python -c pass':32}{floor(repeats):>18}")
    for mode, identity in notes.items():
        print(f"{mode}: pads run as {identity}")


async def measure_all(
    managers: dict[str, ScratchpadManager], repeats: int
) -> dict[str, dict[str, str]]:
    try:
        return await measure(managers, repeats)
    finally:
        for manager in managers.values():
            await manager.close_all()


if __name__ == "__main__":
    main()
