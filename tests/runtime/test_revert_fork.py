"""Undo and fork, with real confined kernels: ``revert`` puts the variables back as they were
before the last cell that changed them (the checkpoint's HEAD moved back, a new kernel
restores from there); ``ScratchpadManager.fork`` copies a pad's packages, variables and
cells into a new pad that starts asleep."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.errors import InstallError, InvalidInputError, PadBusyError, PadNotFoundError
from scratchpad.runtime import checkpoint
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager, pad_root
from scratchpad.runtime.padstate import read_state, reverted
from scratchpad.vault.store import Vault
from tests.runtime.test_checkpoint import kill, saved

DEADLINE_S = 20.0


async def local(manager: ScratchpadManager, name: str) -> LocalRuntime:
    pad = await manager.get_or_create(name)
    assert isinstance(pad, LocalRuntime)
    return pad


async def run(pad: LocalRuntime, code: str) -> str | None:
    cell = await pad.execute(code)
    assert cell.status == "ok", cell.error
    return cell.result


async def test_revert_undoes_an_in_place_mutation(manager: ScratchpadManager) -> None:
    pad = await local(manager, "undo")
    await run(pad, "a = [1, 2, 3]")
    second = await pad.execute("a.append(4)")
    await saved(pad, second.number)
    generation = pad.generation
    assert await pad.revert() == 1
    assert pad.generation == generation + 1  # a new kernel, restored from the earlier one
    after = await pad.execute("a")
    assert after.result == "[1, 2, 3]"
    assert "namespace reverted to after cell 1" in after.logs
    assert "Restored: a" in after.logs
    assert [cell.number for cell in await pad.load_cells()] == [1, 2, 3]  # a record stays
    assert reverted(pad.root) == [2]


async def test_revert_forgets_a_name_the_cell_bound(manager: ScratchpadManager) -> None:
    pad = await local(manager, "bound")
    await run(pad, "x = 1")
    second = await pad.execute("y = [2]")
    await saved(pad, second.number)
    assert await manager.revert("bound") == 1
    assert await run(pad, "('y' in dir(), x)") == "(False, 1)"


async def test_revert_again_goes_one_more_step_back_then_says_it_cannot(
    manager: ScratchpadManager,
) -> None:
    pad = await local(manager, "steps")
    for value in (1, 2, 3):
        cell = await pad.execute(f"n = [{value}]")
    await saved(pad, cell.number)
    assert await pad.revert() == 2
    assert await run(pad, "n") == "[2]"  # read only: the checkpoint does not move
    assert await pad.revert() == 1
    assert await run(pad, "n") == "[1]"
    with pytest.raises(InvalidInputError, match=r"nothing to revert: .*before cell 1"):
        await pad.revert()
    assert await run(pad, "n") == "[1]"  # a refused revert changed nothing
    assert reverted(pad.root) == [3, 2]
    cell = await pad.execute("n = [9]")  # new work after a revert is revertible as usual
    await saved(pad, cell.number)
    assert await pad.revert() == 1
    assert await run(pad, "n") == "[1]"
    await pad.reset()  # forgets everything, the record of reverts too
    assert reverted(pad.root) == []
    with pytest.raises(InvalidInputError, match="nothing to revert: the pad has no checkpoint"):
        await pad.revert()


async def test_nothing_to_revert_says_why(manager: ScratchpadManager) -> None:
    pad = await local(manager, "fresh")
    with pytest.raises(InvalidInputError, match="nothing to revert: the pad has no checkpoint"):
        await pad.revert()
    cell = await pad.execute("only = [1]")
    await saved(pad, cell.number)
    with pytest.raises(InvalidInputError, match="nothing to revert"):
        await pad.revert()
    assert await run(pad, "only") == "[1]"


async def test_checkpoints_off_means_nothing_to_revert(workspace: Path, settings: Settings) -> None:
    off = settings.model_copy(update={"checkpoint_pad_mb": 0})
    async with ScratchpadManager(workspace=workspace, settings=off) as manager:
        pad = await local(manager, "off")
        await run(pad, "a = 1")
        await run(pad, "a = 2")
        with pytest.raises(InvalidInputError, match="SCRATCHPAD_CHECKPOINT_PAD_MB=0"):
            await pad.revert()


async def test_revert_is_refused_while_a_cell_runs(
    manager: ScratchpadManager, scratch: Path
) -> None:
    pad = await local(manager, "busy")
    await run(pad, "a = [1]")
    started = scratch / "started"
    code = f"a.append(2)\nimport time\nopen({str(started)!r}, 'w').close()\ntime.sleep(30)"
    running = asyncio.create_task(pad.execute(code))
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while not started.exists():
        assert asyncio.get_running_loop().time() < deadline, "the cell never started"
        await asyncio.sleep(0.02)
    with pytest.raises(PadBusyError, match="running or waiting to run a cell"):
        await pad.revert()
    assert await pad.cancel()
    assert (await running).status in ("cancelled", "interrupted", "error")


@pytest.fixture
async def granting(workspace: Path, settings: Settings) -> AsyncIterator[ScratchpadManager]:
    """A manager whose vault grants nothing by default (a grant is then visible)."""
    only = settings.model_copy(update={"vault_default_grant": "none"})
    vault = Vault(only.with_home(workspace / ".scratchpad"), keyring=None)
    vault.save("mysql", "dev", {"host": "h"})
    async with ScratchpadManager(workspace=workspace, settings=only, vault=vault) as manager:
        yield manager


async def test_fork_copies_packages_variables_and_cells(
    granting: ScratchpadManager, wheel: Path
) -> None:
    manager = granting
    source = await local(manager, "src")
    await source.install_packages([str(wheel)])
    await run(source, "import sp_demo_pkg\ndata = {'k': [1, 2]}")
    last = await source.execute("data['k'].append(3)")
    await saved(source, last.number)
    manager.vault.grant("src", "mysql", "dev")
    before = (pad_root(manager.settings, "src") / "history.jsonl").read_bytes()

    info = await manager.fork("src", "dst")
    assert (info.name, info.status, info.cells) == ("dst", "asleep", last.number)
    listed = {pad.name: pad.status for pad in await manager.list_pads()}
    assert listed["dst"] == "asleep"
    root = pad_root(manager.settings, "dst")
    assert read_state(root).asleep_since is not None
    assert (root / "requirements.txt").read_text() == (
        pad_root(manager.settings, "src") / "requirements.txt"
    ).read_text()
    assert checkpoint.read_manifest(root) == checkpoint.read_manifest(source.root)
    assert not any(p.stat().st_mode & 0o077 for p in checkpoint.directory(root).rglob("*"))

    forked = await local(manager, "dst")
    cell = await forked.execute("data['k'].append(4)\n(data, sp_demo_pkg.VERSION)")
    assert cell.result == "({'k': [1, 2, 3, 4]}, '1.0')", cell.error
    assert "Restored: data" in cell.logs
    assert cell.number == last.number + 1  # its cells and ids came along: numbering goes on
    assert [c.id for c in (await forked.load_cells())[:-1]] == [
        c.id for c in await source.load_cells()
    ]
    # the source is untouched and still usable
    assert (pad_root(manager.settings, "src") / "history.jsonl").read_bytes() == before
    assert await run(source, "data") == "{'k': [1, 2, 3]}"
    # a fork is a new pad for the vault: the source's grants are not copied
    assert manager.vault.grants("src") == [("mysql", "dev")]
    assert manager.vault.grants("dst") == []


async def test_fork_refuses_an_existing_or_bad_target(manager: ScratchpadManager) -> None:
    pad = await local(manager, "one")
    await run(pad, "a = 1")
    await local(manager, "two")
    with pytest.raises(InvalidInputError, match="exists already"):
        await manager.fork("one", "two")
    with pytest.raises(InvalidInputError, match="into itself"):
        await manager.fork("one", "one")
    with pytest.raises(InvalidInputError):
        await manager.fork("one", "")
    with pytest.raises(PadNotFoundError):
        await manager.fork("nope", "three")
    assert not pad_root(manager.settings, "three").exists()


async def test_a_full_sweep_after_a_restart_is_labelled_with_the_last_cell(
    manager: ScratchpadManager, scratch: Path
) -> None:
    """A sweep (before sleep, a fork) says "after cell N" of the last cell, also in a kernel
    that restored the pad (it counts its own cells from 0): revert steps back from there."""
    pad = await local(manager, "sweep")
    for value in range(3):
        await run(pad, f"v{value} = [{value}]")
    await saved(pad, 3)
    await kill(pad)
    go, done = scratch / "go", scratch / "done"
    cell = await pad.execute(  # the thread changes box once the cell's checkpoint is taken
        "import os, threading, time\nbox = []\n"
        "def later():\n"
        f"    while not os.path.exists({str(go)!r}):\n        time.sleep(0.01)\n"
        f"    box.append(1)\n    open({str(done)!r}, 'w').close()\n"
        "threading.Thread(target=later).start()"
    )
    assert cell.number == 4 and "restored the variables saved after cell 3" in cell.logs
    await saved(pad, cell.number)
    go.touch()
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while not done.exists():
        assert asyncio.get_running_loop().time() < deadline, "the thread never ran"
        await asyncio.sleep(0.01)
    async with pad._lock:
        await pad._slot.checkpoint_all("in a test")
    assert (checkpoint.directory(pad.root) / "HEAD").read_text() == "4"
    assert await pad.revert() == 3
    assert await run(pad, "('box' in dir(), v2)") == "(False, [2])"


async def test_fork_waits_for_the_running_cell_and_copies_what_it_left(
    manager: ScratchpadManager, scratch: Path
) -> None:
    source = await local(manager, "slow")
    started, go = scratch / "started", scratch / "go"
    code = (
        f"import os, time\nopen({str(started)!r}, 'w').close()\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\nlate = [1]"
    )
    running = asyncio.create_task(source.execute(code))
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while not started.exists():
        assert asyncio.get_running_loop().time() < deadline, "the cell never started"
        await asyncio.sleep(0.01)
    forking = asyncio.create_task(manager.fork("slow", "slow-2"))
    while not source._lock._waiters:  # the fork waits its turn
        assert asyncio.get_running_loop().time() < deadline, "the fork never waited"
        await asyncio.sleep(0.01)
    assert not forking.done() and not pad_root(manager.settings, "slow-2").exists()
    go.touch()
    assert (await running).status == "ok"
    assert (await forking).status == "asleep"
    assert await run(await local(manager, "slow-2"), "late") == "[1]"


async def test_fork_of_a_pad_that_is_not_running(workspace: Path, settings: Settings) -> None:
    async with ScratchpadManager(workspace=workspace, settings=settings) as first:
        await run(await local(first, "resting"), "kept = {'v': 1}")
    async with ScratchpadManager(workspace=workspace, settings=settings) as second:
        info = await second.fork("resting", "woken")
        assert info.status == "asleep" and second.names() == []  # neither pad was started
        assert await run(await local(second, "woken"), "kept") == "{'v': 1}"


async def test_a_fork_whose_packages_cannot_be_installed_leaves_no_pad(
    manager: ScratchpadManager, tmp_path: Path
) -> None:
    pad = await local(manager, "pkgs")
    await run(pad, "a = 1")
    missing = tmp_path / "gone-1.0-py3-none-any.whl"
    (pad.root / "requirements.txt").write_text(f"{missing}\n")  # a wheel deleted since
    with pytest.raises(InstallError, match="pad 'pkgs-2' was not made: installing the packages"):
        await manager.fork("pkgs", "pkgs-2")
    assert not pad_root(manager.settings, "pkgs-2").exists()
    assert "pkgs-2" not in [info.name for info in await manager.list_pads()]
    assert await run(pad, "a") == "1"


async def test_a_fork_copies_no_blob_holding_a_secret(manager: ScratchpadManager) -> None:
    """The fork waits for the scan of the last cell's blobs (hard links would keep a blob
    that the source's scan deleted afterwards)."""
    from scratchpad.scrub import register
    from tests.runtime.test_checkpoint import SERVER_SECRET

    register([(SERVER_SECRET, "DS_SRV__PASSWORD")])
    source = await local(manager, "leaky")
    await run(source, f"import os\nrows = [{SERVER_SECRET!r}, os.urandom(30 << 20)]\nplain = 1")
    await manager.fork("leaky", "leaky-2")
    for root in (source.root, pad_root(manager.settings, "leaky-2")):
        for path in checkpoint.directory(root).rglob("*"):
            assert not path.is_file() or SERVER_SECRET.encode() not in path.read_bytes(), path
    forked = await local(manager, "leaky-2")
    cell = await forked.execute("plain, 'rows' in dir()")
    assert cell.result == "(1, False)", cell.error
    assert "rows (its saved value is gone (it held a secret" in cell.logs


def _planted_link(checkpoint_dir: Path, name: str, outside: Path) -> str:
    """A cell replacing its checkpoint's ``name`` with a link to ``outside``, binding no
    variable (so no checkpoint of its own replaces the link before the server looks)."""
    place = str(checkpoint_dir / name)
    plant = f"import os, shutil\nshutil.rmtree({place!r})\nos.symlink({str(outside)!r}, {place!r})"
    return f"exec({plant!r}, {{}})"


async def test_fork_never_follows_a_link_the_pad_put_in_its_checkpoint(
    manager: ScratchpadManager, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"  # the server's, out of the pad's reach
    outside.mkdir(mode=0o700)
    secret = outside / "secret.txt"
    secret.write_text("TOP SECRET")
    secret.chmod(0o600)
    pad = await local(manager, "src")
    await saved(pad, (await pad.execute("x = [1]")).number)
    planted = await pad.execute(_planted_link(pad.root / "checkpoint", "blobs", outside))
    assert planted.status == "ok"
    await manager.fork("src", "dst")
    copied = pad_root(manager.settings, "dst") / "checkpoint" / "blobs"
    assert list(copied.iterdir()) == []  # nothing of what the link points at
    assert secret.stat().st_nlink == 1 and secret.read_text() == "TOP SECRET"


async def test_revert_never_follows_a_link_the_pad_put_in_its_checkpoint(
    manager: ScratchpadManager, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o700)
    for number in range(1, 6):
        (outside / f"{number}.json").write_text("{}")
    pad = await local(manager, "p")
    await run(pad, "x = [1]")
    await saved(pad, (await pad.execute("x = [2]")).number)
    planted = await pad.execute(_planted_link(pad.root / "checkpoint", "manifests", outside))
    assert planted.status == "ok"
    with pytest.raises(InvalidInputError, match="checkpoint is damaged"):
        await pad.revert()
    assert sorted(p.name for p in outside.iterdir()) == [f"{n}.json" for n in range(1, 6)]
