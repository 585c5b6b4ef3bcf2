"""A checkpoint a careless or hostile cell damaged: a full disk, files it deleted or
corrupted, links it put in the place of a directory or a file, a manifest too big or nested
too deep. The cell and the pad go on; the next restore says what could not be restored; the
server never follows a link, never reads a manifest past its cap, never hangs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.runtime import checkpoint
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.scrub import register, scrubber
from tests.runtime.test_checkpoint import ckdir, kill, saved
from tests.test_full_disk import SmallDisk, disk, workspace  # noqa: F401 - fixtures

SECRET = "sk-damaged-checkpoint-3f9a1c77e2"


async def test_a_cell_that_fills_the_disk_stays_ok_and_its_variables_are_saved_later(
    disk: SmallDisk,  # noqa: F811 - the fixture
    workspace: Path,  # noqa: F811 - on the small disk, and so the home
    settings: Settings,
) -> None:
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        pad = await manager.get_or_create("full")
        assert isinstance(pad, LocalRuntime)
        await saved(pad, (await pad.execute("a = [1]")).number)
        fill = (
            "import os\n"
            "fd = os.open('filler', os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)\n"
            "try:\n"
            "    while True:\n"
            "        os.write(fd, bytes(1 << 16))\n"
            "except OSError:\n"
            "    pass\n"
            "os.ftruncate(fd, max(0, os.fstat(fd).st_size - (512 << 10)))\n"  # room for records
            "os.close(fd)\n"
            "big = os.urandom(4 << 20)\n"  # its blob finds no room
            "len(big)"
        )
        filled = await pad.execute(fill)
        assert filled.status == "ok", filled.error
        await pad._slot.flush_checkpoints()  # the writer thread tried (and failed) by now
        after = await pad.execute("1 + 1")  # the writer's failure is told with the next cell
        assert after.status == "ok" and after.result == "2", after.error
        assert "variables not saved: the checkpoint after cell 2 could not be written" in after.logs
        assert "No space left on device" in after.logs
        (pad.cwd / "filler").unlink()  # space again: everything is written again
        again = await pad.execute("c = 3")
        assert again.status == "ok"
        await saved(pad, again.number)
        await kill(pad)
        back = await pad.execute("(a, len(big), c)")
        assert back.result == "([1], 4194304, 3)", back.logs


def corrupt(code: str) -> str:
    """A cell running ``code`` with ``ck`` its checkpoint directory, binding no variable (a
    cell that changes nothing writes no new checkpoint over what it damaged)."""
    return f"exec({code!r}, {{'ck': __import__('pathlib').Path(CK)}})"


DAMAGES = {
    "manifest garbage": (
        "head = (ck / 'HEAD').read_text()\n"
        "(ck / 'manifests' / (head + '.json')).write_bytes(b'\\x00{not json')",
        "could not be restored",
    ),
    "manifest of the wrong shape": (
        "head = (ck / 'HEAD').read_text()\n"
        "(ck / 'manifests' / (head + '.json')).write_text('[1, 2, 3]')",
        "could not be restored",
    ),
    "manifest a FIFO": (  # read without waiting for a writer that never comes
        "import os\nhead = (ck / 'HEAD').read_text()\n"
        "(ck / 'manifests' / (head + '.json')).unlink()\n"
        "os.mkfifo(ck / 'manifests' / (head + '.json'))",
        "could not be restored",
    ),
    "HEAD deleted": ("(ck / 'HEAD').unlink()", "the pad's checkpoint is damaged (its HEAD"),
    "HEAD pointing nowhere": ("(ck / 'HEAD').write_text('999')", "could not be restored"),
    "HEAD garbage": ("(ck / 'HEAD').write_text('../../etc/passwd')", "could not be restored"),
    "everything deleted": (
        "import shutil\nfor p in list(ck.iterdir()):\n"
        "    shutil.rmtree(p) if p.is_dir() else p.unlink()",
        "all variables from before were lost",
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
async def test_a_checkpoint_the_cell_damaged_is_reported_and_the_pad_goes_on(
    manager: ScratchpadManager, damage: str
) -> None:
    pad = await manager.get_or_create("damaged")
    assert isinstance(pad, LocalRuntime)
    await saved(pad, (await pad.execute("a = [1]\nb = {'k': 2}")).number)
    code, said = DAMAGES[damage]
    cell = await pad.execute(corrupt(code).replace("CK", repr(str(ckdir(pad)))))
    assert cell.status == "ok", cell.error
    await kill(pad)
    after = await pad.execute("('a' in dir(), 'b' in dir())")
    assert after.status == "ok", after.error
    assert after.result == "(False, False)"
    assert said in after.logs, after.logs
    assert (await pad.execute("x = 5\nx")).result == "5"  # the pad goes on, and saves again
    await saved(pad, 4)


async def test_a_truncated_blob_costs_only_its_own_names(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("truncated")
    assert isinstance(pad, LocalRuntime)
    first = await pad.execute("a = [1] * 1000")
    await saved(pad, first.number)
    victim = next((ckdir(pad) / "blobs").iterdir()).name
    second = await pad.execute("b = [2]")
    await saved(pad, second.number)
    code = f"p = ck / 'blobs' / {victim!r}\np.write_bytes(p.read_bytes()[:10])"
    cell = await pad.execute(corrupt(code).replace("CK", repr(str(ckdir(pad)))))
    assert cell.status == "ok", cell.error
    await kill(pad)
    after = await pad.execute("('a' in dir(), b)")
    assert after.result == "(False, [2])", after.logs
    assert "Restored: b." in after.logs
    assert "a (ValueError: the blob is damaged (its hash does not match); defined in cell 1" in (
        after.logs
    )


def checkpoint_at(place: Path, *, secret: str = "") -> Path:
    """A checkpoint's files at ``place``: HEAD, a manifest, a blob (holding ``secret``)."""
    (place / "manifests").mkdir(parents=True)
    (place / "blobs").mkdir()
    (place / "HEAD").write_text("1")
    (place / "manifests" / "1.json").write_text(json.dumps({"format": 1, "vars": {}}))
    (place / "blobs" / "b.pkl").write_bytes(b"data " + secret.encode())
    return place


def test_the_server_never_follows_a_link_in_place_of_the_checkpoint(tmp_path: Path) -> None:
    """Where a kernel runs without confinement, its cell can put a link in the checkpoint's
    place: the server reads nothing through it, deletes only the link."""
    root = tmp_path / "pad"
    root.mkdir()
    outside = checkpoint_at(tmp_path / "elsewhere", secret=SECRET)
    (root / checkpoint.DIR_NAME).symlink_to(outside)
    register([(SECRET, "DAMAGE_KEY")])
    assert not checkpoint.exists(root)
    assert checkpoint.read_manifest(root) is None
    assert checkpoint.drop_secrets(root, scrubber()) == 0
    checkpoint.delete(root)
    assert not (root / checkpoint.DIR_NAME).is_symlink()
    assert (outside / "blobs" / "b.pkl").exists() and (outside / "HEAD").exists()


def test_the_server_never_follows_a_link_inside_the_checkpoint(tmp_path: Path) -> None:
    """A confined kernel may put links inside its checkpoint directory."""
    root = tmp_path / "pad"
    outside = checkpoint_at(tmp_path / "elsewhere", secret=SECRET)
    ck = checkpoint.directory(root)
    ck.mkdir(parents=True)
    (ck / "HEAD").symlink_to(outside / "HEAD")
    (ck / "manifests").symlink_to(outside / "manifests")
    (ck / "blobs").symlink_to(outside / "blobs")
    register([(SECRET, "DAMAGE_KEY")])
    assert not checkpoint.exists(root)
    assert checkpoint.read_manifest(root) is None
    (ck / "HEAD").unlink()
    (ck / "HEAD").write_text("1")  # a real HEAD, the manifests still behind a link
    assert checkpoint.read_manifest(root) is None
    assert checkpoint.drop_secrets(root, scrubber()) == 0
    checkpoint.delete(root)
    assert not ck.exists()
    assert (outside / "blobs" / "b.pkl").exists() and (outside / "manifests" / "1.json").exists()


def test_a_blob_that_is_a_link_is_neither_read_nor_deleted(tmp_path: Path) -> None:
    root = tmp_path / "pad"
    ck = checkpoint_at(checkpoint.directory(root))
    target = tmp_path / "elsewhere.pkl"
    target.write_text(f"not the pad's {SECRET}")
    (ck / "blobs" / "link.pkl").symlink_to(target)
    register([(SECRET, "DAMAGE_KEY")])
    assert checkpoint.drop_secrets(root, scrubber()) == 0
    assert target.exists()


def test_a_manifest_past_the_cap_or_nested_too_deep_is_not_read(tmp_path: Path) -> None:
    root = tmp_path / "pad"
    ck = checkpoint_at(checkpoint.directory(root))
    manifest = ck / "manifests" / "1.json"
    assert checkpoint.read_manifest(root) == {"format": 1, "vars": {}}
    padding = " " * checkpoint.MANIFEST_CAP
    manifest.write_text('{"format": 1, "vars": {}}' + padding)  # valid JSON, too big
    assert checkpoint.read_manifest(root) is None
    manifest.write_text("[" * 100_000 + "]" * 100_000)
    assert checkpoint.read_manifest(root) is None


def test_a_fifo_in_place_of_head_does_not_hang_the_server(tmp_path: Path) -> None:
    root = tmp_path / "pad"
    ck = checkpoint_at(checkpoint.directory(root))
    (ck / "HEAD").unlink()
    os.mkfifo(ck / "HEAD")
    assert not checkpoint.exists(root)
    assert checkpoint.read_manifest(root) is None  # opened non-blocking: nothing to read


async def test_a_link_a_cell_put_in_place_of_its_manifests_is_replaced_and_saving_goes_on(
    manager: ScratchpadManager, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"  # the server's: the pad cannot write there
    outside.mkdir(mode=0o700)
    pad = await manager.get_or_create("linked")
    assert isinstance(pad, LocalRuntime)
    await saved(pad, (await pad.execute("a = [1]")).number)
    place = str(ckdir(pad) / "manifests")
    code = f"import os, shutil\nshutil.rmtree({place!r})\nos.symlink({str(outside)!r}, {place!r})"
    assert (await pad.execute(code)).status == "ok"
    cell = await pad.execute("b = [2]")
    assert cell.status == "ok", cell.error
    await saved(pad, cell.number)
    assert not (ckdir(pad) / "manifests").is_symlink() and list(outside.iterdir()) == []
    await kill(pad)
    after = await pad.execute("(a, b)")
    assert after.result == "([1], [2])", after.logs
