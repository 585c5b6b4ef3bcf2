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


async def measure(settings: Settings, workspace: Path, repeats: int) -> dict[str, str]:
    manager = ScratchpadManager(workspace=workspace, settings=settings)
    try:
        await manager.get_or_create("warmup")  # the probe and the first venv: not counted
        new_pad, restart = [], []
        for index in range(repeats):
            start = time.perf_counter()
            pad = await manager.get_or_create(f"p{index}")
            await pad.execute("1+1")
            new_pad.append(time.perf_counter() - start)
        pad = await manager.get_or_create("p0")
        for _ in range(repeats):
            assert isinstance(pad, LocalRuntime) and pad.pid is not None
            os.kill(pad.pid, 9)
            while pad.kernel is not None and not pad.kernel.channel_closed:  # noqa: ASYNC110
                await asyncio.sleep(0.001)
            start = time.perf_counter()
            cell = await pad.execute("1+1")  # notices the death, starts a kernel, runs
            restart.append(time.perf_counter() - start)
            assert cell.result == "2", cell.error
        await asyncio.sleep(0.5)
        assert isinstance(pad, LocalRuntime) and pad.pid is not None
        tree = [pad.pid, *descendants(pad.pid)]
        return {
            "new pad → first result": ms(new_pad),
            "kill + restart → next result": ms(restart),
            "idle pad: processes": str(len(tree)),
            "idle pad: memory (PSS)": f"{proportional(tree) / (1 << 20):.1f} MiB",
            "idle pad: memory (RSS, summed)": f"{resident(tree) / (1 << 20):.1f} MiB",
        }
    finally:
        await manager.close_all()


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
    results: dict[str, dict[str, str]] = {}
    notes: dict[str, str] = {}
    for mode, changes in MODES.items():
        with tempfile.TemporaryDirectory(prefix="scratchpad-bench-") as tmp:
            workspace = Path(tmp) / "ws"
            workspace.mkdir()
            settings = Settings(home=Path(tmp) / "home", **changes)  # type: ignore[arg-type]
            results[mode] = asyncio.run(measure(settings, workspace, repeats))
            notes[mode] = confinement.report(settings)["confinement"]["identity"]
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


if __name__ == "__main__":
    main()
