"""Pads that sleep: an idle pad's kernel stops (no process of it left, no runtime held), its
next use wakes it; never while a cell runs or waits; the generation of its kernels goes on
across restarts and managers (state.json)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager, pad_root
from scratchpad.runtime.padstate import STATE_FILE, PadState, read_state, update_state
from scratchpad.runtime.proctree import group_alive
from tests.process_helpers import process_gone, processes_in, read_pid

SLEEP_AFTER_S = 0.4
WITHIN_S = 30.0


@pytest.fixture
def sleepy(settings: Settings) -> Settings:
    return settings.model_copy(update={"sleep_after_s": SLEEP_AFTER_S})


@pytest.fixture
async def sleeper(workspace: Path, sleepy: Settings) -> AsyncIterator[ScratchpadManager]:
    manager = ScratchpadManager(workspace=workspace, settings=sleepy)
    yield manager
    await manager.close_all()


async def until(condition: object, what: str) -> None:
    """Wait (with a deadline) for ``condition()`` to hold."""
    assert callable(condition)
    deadline = time.monotonic() + WITHIN_S
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.02)


async def local(manager: ScratchpadManager, name: str) -> LocalRuntime:
    pad = await manager.get_or_create(name)
    assert isinstance(pad, LocalRuntime)
    return pad


async def test_an_idle_pad_sleeps_with_no_process_left_and_its_next_cell_wakes_it(
    sleeper: ScratchpadManager, workspace: Path, scratch: Path
) -> None:
    pad = await local(sleeper, "nap")
    child = scratch / "child.pid"
    code = (
        "import subprocess\nx = 41\n"
        f"p = subprocess.Popen(['sleep', '300'])\nopen({str(child)!r}, 'w').write(str(p.pid))"
    )
    assert (await pad.execute(code)).status == "ok"
    leader, generation = pad.pid, pad.generation
    assert leader is not None and generation == 1
    await read_pid(child)  # the cell's own child runs too
    assert processes_in(workspace)
    del pad  # a client that let go of it: the manager holds no runtime of an asleep pad
    await until(lambda: "nap" not in sleeper.names(), "the pad fell asleep")
    assert not group_alive(leader) and process_gone(leader)
    assert processes_in(workspace) == []  # the kernel, its launcher, the cell's child
    state = read_state(pad_root(sleeper.settings, "nap"))
    assert state.asleep_since is not None and state.generation == 1
    [info] = await sleeper.list_pads()
    assert (info.status, info.cells, info.memory_bytes) == ("asleep", 1, None)
    assert info.last_activity is not None and info.last_activity <= state.asleep_since

    woken = await local(sleeper, "nap")
    cell = await woken.execute("x + 1")
    assert cell.status == "ok" and cell.result == "42"  # its variables came back
    assert "The kernel was asleep" in cell.logs and "restored" in cell.logs
    assert woken.generation == 2
    assert read_state(pad_root(sleeper.settings, "nap")).asleep_since is None
    assert [(i.name, i.status) for i in await sleeper.list_pads()] == [("nap", "idle")]


async def test_a_pad_woken_by_a_runtime_new_to_it_says_it_was_asleep(
    sleeper: ScratchpadManager,
) -> None:
    pad = await local(sleeper, "dropped")
    first = await pad.execute("x = 41")
    assert first.status == "ok"
    del pad
    await until(lambda: "dropped" not in sleeper.names(), "the pad fell asleep")
    gone = lambda: gc.collect() >= 0 and "dropped" not in sleeper._asleep  # noqa: E731
    await until(gone, "nobody holds the asleep pad's runtime")
    cell = await (await local(sleeper, "dropped")).execute("x + 1")
    assert cell.result == "42"
    assert f"The kernel was asleep; this is a fresh kernel. It restored the variables saved " \
        f"after cell {first.number}." in cell.logs  # fmt: skip


async def test_a_pad_never_sleeps_while_a_cell_runs_or_waits(sleeper: ScratchpadManager) -> None:
    pad = await local(sleeper, "work")
    running = asyncio.create_task(pad.execute("import time\ntime.sleep(2)", estimated_seconds=5))
    await until(lambda: pad.busy, "the cell started")
    queued = asyncio.create_task(pad.execute("1 + 1"))
    await until(lambda: pad.queued == 1, "the second cell waits")
    later = time.time() + 3600  # however long idle it looks, it does not sleep
    assert not await pad.sleep_if_idle(later)
    assert "work" in sleeper.names()
    assert (await running).status == "ok" and (await queued).result == "2"
    assert not pad.asleep and pad.pid is not None
    await until(lambda: "work" not in sleeper.names(), "it sleeps once idle")


async def test_the_sleeper_leaves_alone_a_pad_a_client_watches(sleeper: ScratchpadManager) -> None:
    pad = await local(sleeper, "watched")
    subscription = sleeper.watch("watched").subscribe()
    try:
        assert not await pad.sleep_if_idle(time.time() + 3600)
        assert "watched" in sleeper.names()
    finally:
        sleeper.watch("watched").unsubscribe(subscription)
    assert await pad.sleep_if_idle(time.time() + 3600)


async def test_the_sleeper_leaves_alone_a_pad_whose_cell_stream_a_client_follows(
    sleeper: ScratchpadManager,
) -> None:
    pad = await local(sleeper, "followed")
    journals = sleeper.watch("followed").journals
    journals.attached += 1  # what GET .../cells/{id}/events does while it streams
    try:
        assert not await pad.sleep_if_idle(time.time() + 3600)
    finally:
        journals.attached -= 1
    assert await pad.sleep_if_idle(time.time() + 3600)


async def test_two_clients_waking_a_pad_at_once_get_one_kernel(
    sleeper: ScratchpadManager,
) -> None:
    pad = await local(sleeper, "shared")
    assert (await pad.execute("1")).status == "ok"
    del pad
    await until(lambda: "shared" not in sleeper.names(), "the pad fell asleep")
    first, second = await asyncio.gather(
        sleeper.get_or_create("shared"), sleeper.get_or_create("shared")
    )
    assert first is second and isinstance(first, LocalRuntime)
    assert first.generation == 2  # one start, not two
    cells = await asyncio.gather(first.execute("import os\nos.getpid()"), second.execute("2"))
    assert [cell.status for cell in cells] == ["ok", "ok"]


async def test_a_pad_held_while_it_sleeps_wakes_in_place_and_is_the_managers_again(
    sleeper: ScratchpadManager,
) -> None:
    pad = await local(sleeper, "held")
    await pad.execute("1")
    await until(lambda: "held" not in sleeper.names(), "the pad fell asleep")
    assert pad.asleep and pad.pid is None
    cell = await pad.execute("2 + 2")  # the caller's old handle still works
    assert cell.result == "4" and "The kernel was asleep" in cell.logs
    assert sleeper.names() == ["held"] and await sleeper.get_or_create("held") is pad


async def test_generation_goes_on_across_restarts_and_managers(
    workspace: Path, settings: Settings
) -> None:
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        pad = await local(manager, "gen")
        assert pad.generation == 1
        await pad.reset()
        assert pad.generation == 2
        await pad.execute("import os\nos.kill(os.getpid(), 9)")
        assert (await pad.execute("1")).status == "ok"  # a fresh kernel after the death
        assert pad.generation == 3
        root = pad_root(manager.settings, "gen")
    assert (root / STATE_FILE).stat().st_mode & 0o777 == 0o600
    async with ScratchpadManager(workspace=workspace, settings=settings) as again:
        pad = await local(again, "gen")
        assert pad.generation == 4


async def test_sleep_after_zero_means_never(workspace: Path, settings: Settings) -> None:
    assert settings.sleep_after_s == 900  # the default: 15 minutes
    never = settings.model_copy(update={"sleep_after_s": 0})
    async with ScratchpadManager(workspace=workspace, settings=never) as manager:
        pad = await local(manager, "awake")
        assert not await pad.sleep_if_idle(time.time() + 10**6)
        assert await manager.sleep_idle(time.time() + 10**6) == []
        assert manager.names() == ["awake"]


def test_a_missing_or_damaged_state_file_reads_as_a_pad_that_never_ran(tmp_path: Path) -> None:
    assert read_state(tmp_path) == PadState()
    state = tmp_path / STATE_FILE
    for damaged in (b"{not json", b"[1, 2]", b"\xff\xfe", b"{}" + b" " * 70_000):
        state.write_bytes(damaged)
        assert read_state(tmp_path) == PadState()
    state.write_text(json.dumps({"generation": -3, "asleep_since": "soon", "last_activity": 1e400}))
    assert read_state(tmp_path) == PadState()
    state.write_text(json.dumps({"generation": True, "asleep_since": float("nan")}))
    assert read_state(tmp_path) == PadState()
    state.unlink()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"generation": 7}))
    state.symlink_to(elsewhere)  # never read through a link
    assert read_state(tmp_path) == PadState()


def test_the_state_file_is_private_and_keeps_fields_it_does_not_know(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text(json.dumps({"generation": 2, "report": {"vars": 3}}))
    written = update_state(tmp_path, generation=3, asleep_since=10.0)
    assert written == PadState(generation=3, asleep_since=10.0)
    raw = json.loads((tmp_path / STATE_FILE).read_text())
    assert raw["report"] == {"vars": 3} and raw["generation"] == 3
    assert os.stat(tmp_path / STATE_FILE).st_mode & 0o777 == 0o600


async def test_after_a_restart_pads_with_cells_list_asleep_and_closed_ones_stopped(
    workspace: Path, settings: Settings
) -> None:
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        await (await manager.get_or_create("worked")).execute("1")
        await manager.get_or_create("empty")
    async with ScratchpadManager(workspace=workspace, settings=settings) as restarted:
        listed = {info.name: info.status for info in await restarted.list_pads()}
        assert listed == {"empty": "stopped", "worked": "asleep"}
        assert (await restarted.pad_info("worked")).status == "asleep"
        await restarted.get_or_create("worked")
        await restarted.close("worked")  # closed on purpose: stopped, not asleep
        assert (await restarted.pad_info("worked")).status == "stopped"


def test_a_remote_client_takes_a_status_and_fields_it_does_not_know() -> None:
    from scratchpad.runtime.remote_http import pad_info

    line = {"name": "far", "status": "hibernating", "cells": 3, "generation": 9}
    info = pad_info(line)
    assert (info.name, info.status, info.cells) == ("far", "hibernating", 3)
