"""A pad without a bound workspace works in a directory of its own under the home: never the
server's current directory, never another pad's; it outlives resets and venv rebuilds and
goes with the pad. The files API and ``read_image`` find the pad's files where it wrote them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.runtime import workdir
from scratchpad.runtime.files import workspace
from scratchpad.runtime.inkernel import sandbox
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools import ToolRegistry, ToolSessionContext, read_image_tool
from tests.images import PNG
from tests.unprivileged import run_as_nobody


@pytest.fixture
async def unbound(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ScratchpadManager]:
    """A manager without a workspace, made in a directory of its own (the server's cwd)."""
    elsewhere = tmp_path / "server-cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    manager = ScratchpadManager(settings=settings)
    yield manager
    await manager.close_all()


async def test_each_pad_writes_in_its_own_directory_not_the_servers(
    unbound: ScratchpadManager, settings: Settings
) -> None:
    first = await unbound.get_or_create("first")
    second = await unbound.get_or_create("second pad")
    wrote = "open('out.txt', 'w').write({!r})\nimport os\nprint(os.getcwd())"
    one = await first.execute(wrote.format("one"))
    two = await second.execute(wrote.format("two"))
    assert one.status == two.status == "ok", (one.error, two.error)
    own = settings.home / "workspaces"
    assert one.stdout.strip() == str(own / "first")
    assert two.stdout.strip() != one.stdout.strip()
    assert Path(two.stdout.strip()).parent == own  # a slug for a name with a space
    assert (own / "first" / "out.txt").read_text() == "one"
    assert (Path(two.stdout.strip()) / "out.txt").read_text() == "two"
    assert not (Path.cwd() / "out.txt").exists()
    assert unbound.workspace_of("first") == own / "first"
    listed = workspace(unbound, "first").listing()
    assert [entry["path"] for entry in listed["entries"]] == ["out.txt"]


@pytest.mark.skipif(sandbox.landlock_abi() == 0, reason="this kernel has no Landlock")
async def test_a_pad_cannot_reach_another_pads_directory(
    unbound: ScratchpadManager, settings: Settings
) -> None:
    first = await unbound.get_or_create("first")
    await first.execute("open('mine.txt', 'w').write('first only')")
    other = await unbound.get_or_create("other")
    path = settings.home / "workspaces" / "first" / "mine.txt"
    cell = await other.execute(f"open({str(path)!r}).read()")
    assert cell.status == "error", cell.result
    assert "PermissionError" in (cell.error or "") or "FileNotFoundError" in (cell.error or "")


async def test_the_directory_outlives_resets_and_rebuilds_and_goes_with_the_pad(
    unbound: ScratchpadManager, settings: Settings
) -> None:
    pad = await unbound.get_or_create("kept")
    await pad.execute("open('notes.txt', 'w').write('kept')")
    await pad.reset()
    assert (await pad.execute("open('notes.txt').read()")).result == "'kept'"
    for _ in range(2):  # a kernel that dies twice in a row gets a rebuilt venv
        assert (await pad.execute("import os\nos._exit(1)")).status == "killed"
    after = await pad.execute("open('notes.txt').read()")
    assert "virtualenv was rebuilt" in after.logs
    assert after.result == "'kept'"
    own = settings.home / "workspaces" / "kept"
    await unbound.remove("kept")
    assert not own.exists() and not (settings.home / "pads" / "kept").exists()
    again = await unbound.get_or_create("kept")
    assert (await again.execute("import os\nos.listdir()")).result == "[]"


async def test_a_stopped_pad_has_its_directory_for_the_files_api(
    unbound: ScratchpadManager, settings: Settings
) -> None:
    """A pad on disk whose directory is missing (made before pads had one) gets it made."""
    (settings.home / "pads" / "old").mkdir(parents=True)
    assert workspace(unbound, "old").listing()["entries"] == []
    own = settings.home / "workspaces" / "old"
    assert own.is_dir() and (own.stat().st_mode & 0o777) == 0o700


async def test_removal_never_follows_a_link_in_the_directorys_place(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "precious").write_text("keep")
    link = tmp_path / "workspaces" / "pad"
    link.parent.mkdir()
    link.symlink_to(target)
    await workdir.remove(link)
    assert not link.exists() and not link.is_symlink()
    assert (target / "precious").read_text() == "keep"


LOCK_AND_REMOVE = """
import asyncio, os
from pathlib import Path
from scratchpad.runtime import workdir
own = workdir.ensure(Path.cwd() / "workspaces" / "p")
(own / "a" / "b").mkdir(parents=True)
(own / "a" / "b" / "f").write_text("x")
(own / "c").mkdir()
(own / "c" / "g").write_text("y")
os.chmod(own / "a" / "b", 0)  # what a cell may do to its own files
os.chmod(own / "a", 0o500)
os.chmod(own / "c", 0o500)
asyncio.run(workdir.remove(own))
print("left" if own.exists() else "gone")
"""


def test_removal_deletes_what_a_cell_locked() -> None:
    """Directories without write or search permission stop a plain rmtree for anyone but
    root: run as an unprivileged user (nobody, see tests/unprivileged.py)."""
    done = run_as_nobody(LOCK_AND_REMOVE, timeout=60)
    assert done.stdout.strip() == "gone", done.stderr


SWAP_DURING_REMOVAL = """
import asyncio, os
from pathlib import Path
from scratchpad.runtime import workdir
own = workdir.ensure(Path.cwd() / "workspaces" / "p")
outside = Path.cwd() / "outside"
(outside / "b").mkdir(parents=True)
(outside / "b" / "precious").write_text("keep")
(own / "a" / "b").mkdir(parents=True)
(own / "a" / "b" / "f").write_text("x")
os.chmod(own / "a" / "b", 0)  # the removal cannot enter it: it unlocks it and goes again
unlock = workdir._unlock

def racing(directory):  # a process of the pad, still running, wins the race meanwhile
    if not (own / "a").is_symlink():
        os.rename(own / "a", own / "moved")
        os.symlink(outside, own / "a")
    unlock(directory)

workdir._unlock = racing
asyncio.run(workdir.remove(own))
print("gone" if not own.exists() else "left", (outside / "b" / "precious").exists())
"""


def test_removal_never_follows_a_link_swapped_in_while_it_runs() -> None:
    """What a removal could not delete at first is deleted again from the top, never by its
    path: a directory on that path swapped for a link out (by a process of the pad that
    outlived it, where nothing contains them) leads nowhere. As nobody: root's removal never
    fails on a mode."""
    done = run_as_nobody(SWAP_DURING_REMOVAL, timeout=60)
    assert done.stdout.strip() == "gone True", done.stdout + done.stderr


async def test_read_image_finds_a_relative_path_in_the_pads_directory(
    unbound: ScratchpadManager,
) -> None:
    pad = await unbound.get_or_create("plots")
    await pad.execute(f"open('plot.png', 'wb').write({PNG!r})")
    registry, context = ToolRegistry([read_image_tool()]), ToolSessionContext(manager=unbound)
    found = await registry.dispatch("read_image", {"path": "plot.png", "pad": "plots"}, context)
    assert found.ok, found.text
    assert str(unbound.workspace_of("plots") / "plot.png") in found.text
    missing = await registry.dispatch("read_image", {"path": "plot.png"}, context)
    assert not missing.ok and "give `pad` too" in missing.text
    escape = await registry.dispatch("read_image", {"path": "../x.png", "pad": "plots"}, context)
    assert not escape.ok and "'..'" in escape.text
