"""Timeouts: the formula, and the interrupt → kill ladder on real kernels."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.runtime.cell import Cell, OutputEvent
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.timeouts import Timeouts, compute_timeouts
from tests.conftest import wait_until_busy


@pytest.mark.parametrize(
    ("estimate", "expected"),
    [
        (None, Timeouts(total=120, inactivity=30)),
        (0, Timeouts(total=120, inactivity=30)),
        (5, Timeouts(total=35, inactivity=30)),
        (40, Timeouts(total=80, inactivity=30)),
        (100, Timeouts(total=200, inactivity=50)),
        (500, Timeouts(total=1000, inactivity=60)),
        (5000, Timeouts(total=3600, inactivity=60)),
    ],
)
def test_compute_timeouts(estimate: float | None, expected: Timeouts) -> None:
    assert compute_timeouts(estimate, Settings()) == expected


def test_inactivity_never_exceeds_total() -> None:
    settings = Settings(default_timeout_s=10, min_inactivity_s=30)
    assert compute_timeouts(0, settings) == Timeouts(total=10, inactivity=10)


def fast(settings: Settings, **changes: float) -> Settings:
    return settings.model_copy(update=changes)


async def test_total_timeout_interrupts_and_keeps_variables(
    workspace: Path, settings: Settings
) -> None:
    quick = fast(settings, default_timeout_s=0.5)
    async with ScratchpadManager(workspace=workspace, settings=quick) as manager:
        pad = await manager.get_or_create("t")
        await pad.execute("kept = 'yes'")
        cell = await pad.execute("import time\nwhile True:\n    print('tick'); time.sleep(0.05)")
        assert cell.status == "timeout"
        assert cell.error is not None
        assert cell.error.startswith("Cell timed out after 0.5s (interrupted; variables are kept)")
        assert "tick" in cell.stdout  # output before the timeout is kept
        assert (await pad.execute("kept")).result == "'yes'"


async def test_inactivity_timeout_interrupts(workspace: Path, settings: Settings) -> None:
    quiet = fast(settings, min_inactivity_s=0.4, max_inactivity_s=0.4)
    async with ScratchpadManager(workspace=workspace, settings=quiet) as manager:
        pad = await manager.get_or_create("t")
        cell = await pad.execute("import time\ntime.sleep(30)")
        assert cell.status == "timeout"
        assert cell.error is not None
        assert cell.error.startswith("Cell killed after 0.4s without output (interrupted")
        assert (await pad.execute("1")).status == "ok"


async def test_progress_resets_the_inactivity_clock(workspace: Path, settings: Settings) -> None:
    quiet = fast(settings, min_inactivity_s=0.5, max_inactivity_s=0.5)
    async with ScratchpadManager(workspace=workspace, settings=quiet) as manager:
        pad = await manager.get_or_create("t")
        code = "import time\nfor i in range(8):\n    time.sleep(0.2)\n    progress(f'step {i}')"
        cell = await pad.execute(code)  # 1.6 s in all, never 0.5 s silent
        assert cell.status == "ok", cell.error
        assert cell.logs.splitlines() == [f"step {i}" for i in range(8)]


async def test_estimate_extends_the_total(workspace: Path, settings: Settings) -> None:
    tight = fast(settings, default_timeout_s=0.3, timeout_slack_s=0.0)
    async with ScratchpadManager(workspace=workspace, settings=tight) as manager:
        pad = await manager.get_or_create("t")
        cell = await pad.execute("import time\ntime.sleep(0.6)\n'done'", estimated_seconds=0.5)
        assert cell.status == "ok"  # total = 2 × 0.5 s
        assert cell.result == "'done'"


async def test_steady_output_to_a_slow_listener_still_times_out(
    workspace: Path, settings: Settings
) -> None:
    quick = fast(settings, default_timeout_s=0.5)
    async with ScratchpadManager(workspace=workspace, settings=quick) as manager:
        pad = await manager.get_or_create("chatty")
        code = "import time\nwhile True:\n    print('.', flush=True)\n    time.sleep(0.005)"
        last = None
        async for item in pad.execute_streaming(code):
            last = item
            await asyncio.sleep(0.02)  # slower than the kernel: events are always queued
        assert isinstance(last, Cell)
        assert last.status == "timeout"


async def test_cancel_while_the_listener_holds_an_item(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("held")
    stream = pad.execute_streaming("import time\nprint('one', flush=True)\ntime.sleep(25)")
    first = await anext(stream)  # the listener is busy with this item, not waiting
    assert isinstance(first, OutputEvent)
    cancelling = asyncio.create_task(pad.cancel())
    await asyncio.sleep(0.05)
    rest = [item async for item in stream]  # ends by the cancel, not by the 30 s inactivity
    await cancelling
    cell = rest[-1]
    assert isinstance(cell, Cell) and cell.status == "cancelled"


async def test_cancel_while_the_kernel_starts(tmp_path: Path, settings: Settings) -> None:
    pad = LocalRuntime("starting", root=tmp_path / "starting", cwd=tmp_path, settings=settings)
    task = asyncio.create_task(pad.execute("print('should not run')"))
    await wait_until_busy(pad)
    await pad.cancel()
    cell = await task
    assert cell.status == "cancelled"
    assert cell.error is not None and "before it started" in cell.error
    assert cell.stdout == ""
    assert (await pad.execute("1")).result == "1"
    await pad.close()
