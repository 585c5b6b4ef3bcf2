"""Pad runtime benchmark: ours side by side with a Jupyter kernel, measured in the same run.

Run with ``make bench`` (installs jupyter_client + ipykernel from the ``bench`` extra).
Prints medians of repeated runs; nothing here is asserted. ``--quick`` uses fewer repeats.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scratchpad.config import Settings
from scratchpad.runtime.limits import proportional
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.proctree import descendants

MIB = 1024 * 1024
PRINT_ONE_LINE = "print('x' * (1024 * 1024 - 1))"
PRINT_MANY_LINES = "print(('y' * 63 + '\\n') * 16383 + 'y' * 63)"

Row = tuple[str, str, str, str]  # metric, ours, jupyter, target


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def fmt_ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} ms"


def tree_pss_mib(pid: int) -> float:
    """Proportional memory of a process and all its descendants (shared pages divided among
    the processes that map them: a confined kernel's holder and init share most of theirs)."""
    return proportional([pid, *descendants(pid)]) / MIB


def exited(pid: int) -> bool:
    """Every thread of ``pid`` has exited (a zombie leader alone is not enough: the kernel's
    heartbeat thread may still be on its way out)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return True  # already reaped
    for task in tasks:
        try:
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            return False
    return True


# -- ours -----------------------------------------------------------------------------------
async def measure_ours(repeats: int, home: Path) -> dict[str, float]:
    settings = Settings(home=home)
    results: dict[str, float] = {}
    manager = ScratchpadManager(settings=settings)

    new_pad: list[float] = []
    for index in range(repeats):
        start = time.perf_counter()
        pad = await manager.get_or_create(f"new{index}")
        await pad.execute("1+1")
        new_pad.append(time.perf_counter() - start)
    results["new"] = median_ms(new_pad)

    warm: list[float] = []
    for index in range(repeats):
        await manager.close(f"new{index}")
        start = time.perf_counter()
        pad = await manager.get_or_create(f"new{index}")
        await pad.execute("1+1")
        warm.append(time.perf_counter() - start)
    results["warm"] = median_ms(warm)

    pad = await manager.get_or_create("bench")
    for _ in range(200):
        await pad.execute("1+1")
    round_trips = []
    for _ in range(2000):
        start = time.perf_counter()
        await pad.execute("1+1")
        round_trips.append(time.perf_counter() - start)
    results["rtt_us"] = statistics.median(round_trips) * 1e6

    thousand = []
    for _ in range(repeats):
        start = time.perf_counter()
        for index in range(1000):
            await pad.execute(f"v = {index}")
        thousand.append(time.perf_counter() - start)
    results["1000"] = median_ms(thousand)

    for key, code in (("print1", PRINT_ONE_LINE), ("printN", PRINT_MANY_LINES)):
        samples = []
        for _ in range(repeats * 2):
            start = time.perf_counter()
            cell = await pad.execute(code)
            samples.append(time.perf_counter() - start)
            assert len(cell.stdout) == MIB, len(cell.stdout)  # the full output is kept
        results[key] = median_ms(samples)

    await pad.reset()
    await asyncio.sleep(0.5)
    assert isinstance(pad, LocalRuntime) and pad.pid is not None
    results["rss"] = tree_pss_mib(pad.pid)

    await pad.execute("state = 'kept'")
    interrupts = []
    for _ in range(repeats):
        task = asyncio.create_task(pad.execute("while True: pass"))
        while not pad.busy:  # noqa: ASYNC110 - polling a property
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.05)
        start = time.perf_counter()
        await pad.cancel()
        cell = await task
        interrupts.append(time.perf_counter() - start)
        assert cell.status == "cancelled", cell.error
    assert (await pad.execute("state")).result == "'kept'"
    results["interrupt"] = median_ms(interrupts)

    restarts = []
    for _ in range(repeats):
        assert pad.pid is not None
        os.kill(pad.pid, 9)
        while not exited(pad.pid):  # noqa: ASYNC110 - wait until it is really dead
            await asyncio.sleep(0.001)
        start = time.perf_counter()
        cell = await pad.execute("1+1")  # notices the death, restarts the kernel, runs
        restarts.append(time.perf_counter() - start)
        assert cell.result == "2"
    results["restart"] = median_ms(restarts)
    await manager.close_all()
    return results


# -- Jupyter --------------------------------------------------------------------------------
def measure_jupyter(repeats: int) -> dict[str, float] | None:
    try:
        from jupyter_client.manager import start_new_kernel
    except ImportError:
        return None

    def run(client: Any, code: str) -> str:
        """Execute and collect stdout until the kernel is idle again."""
        msg_id = client.execute(code)
        out: list[str] = []
        while True:
            msg = client.get_iopub_msg(timeout=60)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        client.get_shell_msg(timeout=60)
        return "".join(out)

    results: dict[str, float] = {}
    starts = []
    for _ in range(repeats):
        start = time.perf_counter()
        manager, client = start_new_kernel(kernel_name="python3")
        run(client, "1+1")
        starts.append(time.perf_counter() - start)
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    results["new"] = results["warm"] = median_ms(starts)

    manager, client = start_new_kernel(kernel_name="python3")
    for _ in range(50):
        run(client, "1+1")
    round_trips = []
    for _ in range(300):
        start = time.perf_counter()
        run(client, "1+1")
        round_trips.append(time.perf_counter() - start)
    results["rtt_us"] = statistics.median(round_trips) * 1e6

    start = time.perf_counter()
    for index in range(1000):
        run(client, f"v = {index}")
    results["1000"] = (time.perf_counter() - start) * 1000

    for key, code in (("print1", PRINT_ONE_LINE), ("printN", PRINT_MANY_LINES)):
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            text = run(client, code)
            samples.append(time.perf_counter() - start)
            assert len(text) == MIB, len(text)
        results[key] = median_ms(samples)

    time.sleep(0.5)
    provisioner = manager.provisioner
    pid = getattr(getattr(provisioner, "process", None), "pid", None)
    results["rss"] = tree_pss_mib(pid) if pid else float("nan")

    interrupts = []
    for _ in range(repeats):
        msg_id = client.execute("while True: pass")
        time.sleep(0.1)
        start = time.perf_counter()
        manager.interrupt_kernel()
        while True:
            reply = client.get_shell_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        interrupts.append(time.perf_counter() - start)
    results["interrupt"] = median_ms(interrupts)

    restarts = []
    for _ in range(repeats):
        start = time.perf_counter()
        manager.restart_kernel(now=True)
        client.wait_for_ready(timeout=60)
        run(client, "1+1")
        restarts.append(time.perf_counter() - start)
    results["restart"] = median_ms(restarts)
    client.stop_channels()
    manager.shutdown_kernel(now=True)
    return results


def measure_bare_python(python: Path, repeats: int, *flags: str) -> float:
    """The floor under any kernel start: an interpreter that does nothing."""
    samples = []
    for _ in range(repeats * 2):
        start = time.perf_counter()
        subprocess.run([str(python), *flags, "-c", "pass"], check=True)
        samples.append(time.perf_counter() - start)
    return median_ms(samples)


ROWS: list[tuple[str, str, Callable[[float], str], str]] = [
    ("new pad → first result", "new", fmt_ms, "≤ 80 ms"),
    ("warm start → first result", "warm", fmt_ms, "≤ 40 ms"),
    ("1+1 round trip (pad.execute)", "rtt_us", lambda v: f"{v:.0f} µs", "≤ 150 µs"),
    ("1000 tiny cells", "1000", fmt_ms, "≤ 150 ms"),
    ("print 1 MiB, one line", "print1", fmt_ms, "≤ 10 ms"),
    ("print 1 MiB, 16384 lines", "printN", fmt_ms, "≤ 10 ms"),
    ("idle memory (PSS), process tree", "rss", lambda v: f"{v:.1f} MiB", "≤ 15 MiB"),
    ("interrupt while True → reply", "interrupt", fmt_ms, "≤ 5 ms"),
    ("kill + restart → next result", "restart", fmt_ms, "≤ 40 ms"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    with tempfile.TemporaryDirectory(prefix="scratchpad-bench-") as tmp:
        ours = asyncio.run(measure_ours(repeats, Path(tmp)))
        python = Path(tmp) / "pads" / "bench" / "bin" / "python"
        bare = measure_bare_python(python, repeats)
        no_site = measure_bare_python(python, repeats, "-S")
    jupyter = measure_jupyter(repeats)
    print(f"Python {sys.version.split()[0]} on {os.cpu_count()} CPUs; medians of {repeats} runs")
    print(f"{'metric':34} {'scratchpad':>12} {'jupyter':>12}   target")
    for label, key, show, target in ROWS:
        other = show(jupyter[key]) if jupyter else "not installed"
        print(f"{label:34} {show(ours[key]):>12} {other:>12}   {target}")
    print(f"{'floor: python -c pass (pad venv)':34} {fmt_ms(bare):>12}")
    print(f"{'floor: python -S -c pass (no site)':34} {fmt_ms(no_site):>12}")


if __name__ == "__main__":
    main()
