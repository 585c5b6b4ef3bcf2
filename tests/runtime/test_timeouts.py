"""Timeouts: the formula, and the interrupt → kill ladder on real kernels."""

from __future__ import annotations

import asyncio
import math
import os
import signal
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError
from scratchpad.runtime.cell import Cell, OutputEvent
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.remote import RemoteRuntime
from scratchpad.runtime.timeouts import Timeouts, compute_timeouts
from tests.conftest import wait_until_busy
from tests.process_helpers import kernel_pid


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


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"timeout_s": math.nan}, "timeout_s must be a number of seconds > 0"),
        ({"timeout_s": math.inf}, "timeout_s must be a number of seconds > 0"),
        ({"timeout_s": 0}, "timeout_s must be a number of seconds > 0"),
        ({"timeout_s": -3}, "timeout_s must be a number of seconds > 0"),
        ({"estimated_seconds": math.nan}, "estimated_seconds must be a number of seconds >= 0"),
        ({"estimated_seconds": -math.inf}, "estimated_seconds must be a number of seconds >= 0"),
    ],
)
async def test_every_runtime_refuses_a_meaningless_number_of_seconds(
    given: dict[str, float], words: str, settings: Settings, workspace: Path
) -> None:
    """Refused before anything happens: no kernel starts, no request leaves (nothing
    listens at the remote's address, which would be a different error)."""
    local = LocalRuntime("p", root=settings.home / "pads" / "p", cwd=workspace, settings=settings)
    remote = RemoteRuntime("p", url="http://127.0.0.1:9", api_key="k")
    try:
        for pad in (local, remote):
            with pytest.raises(InvalidInputError, match=words):
                await pad.execute("1 + 1", **given)  # type: ignore[arg-type]
    finally:
        await remote.detach()
    assert not (settings.home / "pads").exists()


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


def lively(settings: Settings, **changes: float) -> Settings:
    """Heartbeats every 0.1 s and a 0.6 s window without any sign of life."""
    base = {"heartbeat_s": 0.1, "min_inactivity_s": 0.6, "max_inactivity_s": 0.6}
    return settings.model_copy(update={**base, **changes})


async def test_a_quiet_cell_lives_on_heartbeats(workspace: Path, settings: Settings) -> None:
    async with ScratchpadManager(workspace=workspace, settings=lively(settings)) as manager:
        pad = await manager.get_or_create("quiet")
        cell = await pad.execute("import time\ntime.sleep(2)\n'awake'")  # 2 s of silence
        assert cell.status == "ok", cell.error
        assert cell.result == "'awake'"


async def test_a_stopped_kernel_counts_as_hung_and_is_killed(
    workspace: Path, settings: Settings
) -> None:
    async with ScratchpadManager(workspace=workspace, settings=lively(settings)) as manager:
        pad = await manager.get_or_create("stopped")
        assert isinstance(pad, LocalRuntime)
        stream = pad.execute_streaming("import time\nprint('going', flush=True)\ntime.sleep(60)")
        assert isinstance(await anext(stream), OutputEvent)
        assert pad.pid is not None
        os.kill(kernel_pid(pad), signal.SIGSTOP)  # no heartbeat, no output, SIGINT cannot land
        cell = [item async for item in stream][-1]
        assert isinstance(cell, Cell) and cell.status == "killed"
        assert cell.error is not None
        assert cell.error.startswith("Cell stopped after 0.6s without a sign of life")
        assert "What this cell changed was lost. The new kernel restores" in cell.error
        assert (await pad.execute("1 + 1")).result == "2"


async def test_c_code_holding_the_gil_is_interrupted_when_it_checks_signals(
    workspace: Path, settings: Settings
) -> None:
    async with ScratchpadManager(workspace=workspace, settings=lively(settings)) as manager:
        pad = await manager.get_or_create("regex")
        await pad.execute("kept = 1")
        cell = await pad.execute("import re\nre.match(r'(a+)+$', 'a' * 40 + '!')")
        assert cell.status == "timeout"  # the regex engine looks at signals: state kept
        assert cell.error is not None and "without a sign of life" in cell.error
        assert "variables are kept" in cell.error
        assert (await pad.execute("kept")).result == "1"


async def test_c_code_that_never_looks_at_signals_is_killed(
    workspace: Path, settings: Settings
) -> None:
    quick = lively(settings, interrupt_grace_s=0.5)
    async with ScratchpadManager(workspace=workspace, settings=quick) as manager:
        pad = await manager.get_or_create("ctypes")
        cell = await pad.execute("sum(range(10**12))")  # C code: no signal checks, no GIL release
        assert cell.status == "killed"
        assert cell.error is not None and "without a sign of life" in cell.error
        assert (await pad.execute("1")).result == "1"


async def test_timeout_s_is_a_hard_limit_shorter_than_the_defaults(
    workspace: Path, settings: Settings
) -> None:
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        pad = await manager.get_or_create("hard")
        await pad.execute("kept = 1")
        cell = await pad.execute(
            "import time\ntime.sleep(30)", timeout_s=0.5, estimated_seconds=600
        )
        assert cell.status == "timeout"
        assert cell.error is not None
        assert cell.error.startswith("Cell timed out after 0.5s (interrupted; variables are kept)")
        assert "That was its timeout_s" in cell.error and "estimated_seconds" not in cell.error
        assert "killed" not in cell.error.split("\n")[0]  # no contradiction
        assert (await pad.execute("kept")).result == "1"


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), 7200, "5", True])
async def test_bad_timeout_s_is_refused(manager: ScratchpadManager, bad: object) -> None:
    pad = await manager.get_or_create("hard")
    with pytest.raises(InvalidInputError, match="timeout_s must be a number of seconds > 0"):
        await pad.execute("1", timeout_s=bad)  # type: ignore[arg-type]


def test_heartbeats_must_fit_the_inactivity_window() -> None:
    with pytest.raises(ValueError, match="at least twice SCRATCHPAD_HEARTBEAT_S"):
        Settings(heartbeat_s=20, min_inactivity_s=30)


async def test_an_early_cancel_waits_for_the_cell_to_start(
    workspace: Path, settings: Settings
) -> None:
    """A cancel that arrives before the kernel entered the cell must not end in a kill."""
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        pad = await manager.get_or_create("early")
        assert isinstance(pad, LocalRuntime) and pad.pid is not None
        await pad.execute("kept = 1")
        kernel = kernel_pid(pad)
        os.kill(kernel, signal.SIGSTOP)  # the kernel cannot even read the cell
        try:
            task = asyncio.create_task(pad.execute("import time\ntime.sleep(30)"))
            await wait_until_busy(pad)
            cancelling = asyncio.create_task(pad.cancel())
            await asyncio.sleep(settings.interrupt_grace_s * 1.5)  # longer than the grace
        finally:
            os.kill(kernel, signal.SIGCONT)
        assert await cancelling
        cell = await task
        assert cell.status == "cancelled", (cell.error, cell.stderr[-500:], cell.logs)
        assert cell.error is not None and cell.error.startswith("Cell cancelled (interrupted")
        assert (await pad.execute("kept")).result == "1"


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


async def test_a_cell_that_swallows_its_interrupt_says_so(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("stubborn")
    code = (
        "import time\ntry:\n    time.sleep(30)\nexcept BaseException:\n    pass\n'finished anyway'"
    )
    cell = await pad.execute(code, timeout_s=0.5)
    assert cell.status == "ok" and cell.result == "'finished anyway'"
    assert "Cell timed out after 0.5s: the cell caught the interrupt and finished." in cell.logs


async def test_a_kernel_that_never_enters_the_cell_is_killed_saying_so(
    workspace: Path, settings: Settings
) -> None:
    async with ScratchpadManager(workspace=workspace, settings=lively(settings)) as manager:
        pad = await manager.get_or_create("frozen")
        assert isinstance(pad, LocalRuntime) and pad.pid is not None
        os.kill(kernel_pid(pad), signal.SIGSTOP)  # stopped before the cell even arrives
        cell = await pad.execute("1")
        assert cell.status == "killed"
        assert cell.error is not None
        assert "the kernel never entered the cell (no sign of life)" in cell.error
        assert "did not stop when interrupted" not in cell.error
        assert (await pad.execute("2")).result == "2"
