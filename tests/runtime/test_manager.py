"""ScratchpadManager: one kernel per name, parallel pads, removal, names."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from scratchpad.errors import InvalidPadNameError, PadNotFoundError
from scratchpad.padnames import dir_name, validate_pad_name
from scratchpad.runtime.cell import Cell
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.scrub import register
from tests.conftest import wait_until_busy


async def test_concurrent_get_or_create_starts_one_kernel(manager: ScratchpadManager) -> None:
    pads = await asyncio.gather(*(manager.get_or_create("shared") for _ in range(5)))
    assert all(pad is pads[0] for pad in pads)
    assert isinstance(pads[0], LocalRuntime)
    cell = await pads[0].execute("import os\nos.getpid()")
    assert cell.result == str(pads[0].kernel.ready["pid"] if pads[0].kernel else None)
    assert manager.names() == ["shared"]


async def test_different_pads_run_in_parallel(manager: ScratchpadManager, scratch: Path) -> None:
    flag = scratch / "flag"
    waiter = await manager.get_or_create("waiter")
    setter = await manager.get_or_create("setter")
    wait_code = (
        f"import os, time\nwhile not os.path.exists({str(flag)!r}):\n    time.sleep(0.01)\n'saw it'"
    )
    waiting = asyncio.create_task(waiter.execute(wait_code, estimated_seconds=20))
    await asyncio.sleep(0.1)
    made = await setter.execute(f"open({str(flag)!r}, 'w').close()")  # would deadlock if serial
    assert made.status == "ok"
    assert (await waiting).result == "'saw it'"


async def test_remove_deletes_the_environment(manager: ScratchpadManager) -> None:
    await manager.get_or_create("gone")
    root = manager.settings.home / "pads" / "gone"
    assert root.is_dir()
    await manager.remove("gone")
    assert not root.exists()
    assert manager.names() == []
    with pytest.raises(PadNotFoundError, match="no pad named 'gone'"):
        await manager.remove("gone")


async def test_close_all_keeps_environments(manager: ScratchpadManager) -> None:
    for name in ("a", "b"):
        await manager.get_or_create(name)
    await manager.close_all()
    assert manager.names() == []
    assert manager.names_on_disk() == ["a", "b"]


async def test_cancel_all_running(manager: ScratchpadManager) -> None:
    pads = [await manager.get_or_create(name) for name in ("x", "y")]
    tasks = [asyncio.create_task(pad.execute("while True: pass")) for pad in pads]
    await wait_until_busy(*pads)
    await manager.cancel_all_running()
    cells = await asyncio.gather(*tasks)
    assert [cell.status for cell in cells] == ["cancelled", "cancelled"]


async def test_history_survives_a_new_manager(workspace: Path, manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("kept")
    await pad.execute("print('remembered')", description="first")
    await manager.close_all()
    reopened = ScratchpadManager(workspace=workspace, settings=manager.settings).peek("kept")
    assert [cell.description for cell in reopened.cells] == ["first"]
    assert "remembered" in reopened.dump()


async def test_abandoned_stream_still_records_the_cell(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("drop")
    stream = pad.execute_streaming("import time\nprint('start')\ntime.sleep(0.3)\n'finished'")
    first = await anext(stream)
    assert not isinstance(first, Cell)
    await stream.aclose()  # the listener goes away mid-cell
    after = await pad.execute("2")  # waits for the abandoned cell, then runs
    assert after.result == "2"
    assert [cell.result for cell in pad.cells] == ["'finished'", "2"]


async def test_cancelled_caller_does_not_lose_the_cell(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("cancelled-caller")
    task = asyncio.create_task(pad.execute("import time\ntime.sleep(0.3)\n'done anyway'"))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await pad.execute("3")).result == "3"
    assert [cell.result for cell in pad.cells] == ["'done anyway'", "3"]


def test_probe_packages_lists_host_packages() -> None:
    found = ScratchpadManager.probe_packages()
    assert any(entry.startswith("pydantic==") for entry in found)


@pytest.mark.parametrize(
    "name", ["", "tab\tname", "new\n", "bell\x07", "\x9b", "lone\ud800", "x" * 129, None, 5]
)
async def test_invalid_names_are_refused_before_touching_disk(
    manager: ScratchpadManager, name: object
) -> None:
    with pytest.raises(InvalidPadNameError, match="invalid pad name"):
        await manager.get_or_create(name)  # type: ignore[arg-type]
    assert not (manager.settings.home / "pads").exists()


async def test_a_name_that_holds_a_secret_is_refused(manager: ScratchpadManager) -> None:
    """A pad's name is shown everywhere unscrubbed (its directory, listings, the audit log),
    so a new pad may not be named with a secret value."""
    register([("hunter2-long-pw", "DS_REDIS_CACHE__PASSWORD")])
    with pytest.raises(InvalidPadNameError, match="holds a secret") as raised:
        await manager.get_or_create("pad-hunter2-long-pw")
    assert "hunter2-long-pw" not in str(raised.value)
    assert "[DS_REDIS_CACHE__PASSWORD]" in str(raised.value)
    assert not (manager.settings.home / "pads").exists()


@pytest.mark.parametrize("name", ["main", "a", "Data-2", "v1.0_x", "x" * 64])
def test_plain_names_are_their_own_directory(name: str) -> None:
    assert validate_pad_name(name) == name
    assert dir_name(name) == name


@pytest.mark.parametrize(
    "name", ["my pad", "données", "data/analysis", "/etc", "..", ".", ".hidden", "a\\b", "x" * 128]
)
async def test_any_other_name_gets_a_directory_of_its_own_inside_pads(
    manager: ScratchpadManager, name: str
) -> None:
    pad = await manager.get_or_create(name)
    assert (await pad.execute("6 * 7")).result == "42"
    pads = manager.settings.home / "pads"
    [directory] = list(pads.iterdir())
    assert directory.parent == pads and "+" in directory.name  # a slug and a hash
    assert manager.names_on_disk() == [name]
    await manager.close_all()
    assert [c.result for c in manager.peek(name).cells] == ["42"]  # found again by name


def test_distinct_names_never_share_a_directory() -> None:
    names = ["a/b", "a b", "a-b", "a\\b", "a?b", "A/B", "a-b+0", "données", "donnees"]
    assert len({dir_name(name) for name in names}) == len(names)
    assert dir_name("a-b") == "a-b"  # a plain name cannot look like a slug + hash: no '+'


async def test_stray_entries_under_pads_are_skipped_with_a_warning(
    manager: ScratchpadManager, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await manager.get_or_create("real")
    pads = manager.settings.home / "pads"
    (pads / "not a pad").mkdir()
    (pads / "file.txt").write_text("x")
    (pads / "link").symlink_to(tmp_path)
    (pads / "fake+0123456789ab").mkdir()  # a hashed name with no pad.json naming it
    with caplog.at_level("WARNING"):
        assert manager.names_on_disk() == ["real"]
    skipped = caplog.text
    for entry in ("not a pad", "file.txt", "link", "fake+0123456789ab"):
        assert f"skipping {entry}" in skipped
    assert [info.name for info in await manager.list_pads()] == ["real"]


async def test_a_pad_closed_directly_is_started_again(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("reopen")
    await pad.execute("print('before')")
    await pad.close()
    again = await manager.get_or_create("reopen")
    assert not again.closed
    assert (await again.execute("1")).status == "ok"
    assert [cell.stdout for cell in again.cells] == ["before\n", ""]


async def test_get_or_create_waits_for_a_removal_of_the_same_name(
    manager: ScratchpadManager,
) -> None:
    await manager.get_or_create("phoenix")
    _, reborn = await asyncio.gather(manager.remove("phoenix"), manager.get_or_create("phoenix"))
    cell = await reborn.execute("import sys\nsys.prefix")
    assert cell.status == "ok", cell.error
    assert (manager.settings.home / "pads" / "phoenix" / "bin" / "python").exists()


async def test_a_cell_cancelled_before_it_arrived_never_runs(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("late")
    assert not await pad.cancel("on-its-way")  # nothing to cancel yet ...
    cell = await pad.execute("ran = True", cell_id="on-its-way")  # ... but it must not run
    assert cell.status == "cancelled" and "nothing ran" in (cell.error or "")
    assert (await pad.execute("'ran' in dir()")).result == "False"
