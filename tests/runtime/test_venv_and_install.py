"""Virtualenvs per pad (create, reuse, rebuild, restore) and package installs."""

from __future__ import annotations

import asyncio
import errno
import json
import os
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.errors import InstallError, InvalidInputError, KernelStartError, VenvError
from scratchpad.runtime import venv
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager

KERNELS = Path(__file__).parent.parent / "kernels"


def pad_root(manager: ScratchpadManager, name: str) -> Path:
    return manager.settings.home / "pads" / name


async def test_venv_is_created_verified_and_sees_host_packages(
    manager: ScratchpadManager,
) -> None:
    pad = await manager.get_or_create("env")
    root = pad_root(manager, "env")
    assert venv.venv_python(root).exists()
    marker = json.loads((root / venv.MARKER).read_text())
    assert marker["python_version"] == venv.host_python_version()
    cell = await pad.execute("import sys, pytest\nsys.prefix")  # pytest comes from the host
    assert cell.status == "ok", cell.error
    assert cell.result == repr(str(root))


async def test_existing_venv_is_reused(workspace: Path, settings: Settings) -> None:
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        await manager.get_or_create("keep")
        python = venv.venv_python(pad_root(manager, "keep"))
        before = python.lstat().st_ino
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        pad = await manager.get_or_create("keep")
        assert python.lstat().st_ino == before
        assert (await pad.execute("1")).status == "ok"


async def test_a_venv_of_another_python_is_rebuilt(workspace: Path, settings: Settings) -> None:
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        await manager.get_or_create("fragile")
        root = pad_root(manager, "fragile")
    (root / venv.MARKER).write_text('{"python_version": "3.0.0"}')
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        pad = await manager.get_or_create("fragile")
        cell = await pad.execute("1")
        assert cell.status == "ok"
        assert "virtualenv was rebuilt" in cell.logs


async def test_a_broken_venv_interpreter_does_not_stop_its_kernel(
    workspace: Path, settings: Settings
) -> None:
    """Kernels start from the host's interpreter: whatever the pad left in its bin/."""
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        await manager.get_or_create("fragile")
        root = pad_root(manager, "fragile")
    venv.venv_python(root).unlink()
    (root / "bin" / "python").symlink_to("/nonexistent/python")
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        pad = await manager.get_or_create("fragile")
        cell = await pad.execute("1")
        assert cell.status == "ok" and "rebuilt" not in cell.logs


async def test_version_mismatch_rebuilds(workspace: Path, settings: Settings) -> None:
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        await manager.get_or_create("old")
        root = pad_root(manager, "old")
    (root / venv.MARKER).write_text(json.dumps({"python_version": "2.7.18"}))
    assert not venv.is_reusable(root)
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        await manager.get_or_create("old")
    assert venv.is_reusable(root)


async def test_kernel_that_never_starts_fails_after_three_attempts(
    tmp_path: Path, settings: Settings
) -> None:
    pad = LocalRuntime(
        "doomed",
        root=tmp_path / "doomed",
        cwd=tmp_path,
        settings=settings,
        worker=KERNELS / "exit_at_boot.py",
    )
    with pytest.raises(KernelStartError) as caught:
        await pad.start()
    message = str(caught.value)
    assert "no kernel after 3 attempts" in message
    assert "this kernel refuses to start" in message


async def test_install_makes_a_package_importable_without_restart(
    manager: ScratchpadManager, wheel: Path
) -> None:
    pad = await manager.get_or_create("inst")
    await pad.execute("kept = 'state'")
    output = await pad.install_packages([str(wheel)])
    assert "sp-demo-pkg" in output.lower().replace("_", "-")
    cell = await pad.execute("import sp_demo_pkg\n(sp_demo_pkg.VERSION, kept)")
    assert cell.result == "('1.0', 'state')"
    requirements = (pad_root(manager, "inst") / "requirements.txt").read_text()
    assert str(wheel) in requirements


async def test_installed_packages_survive_reset(manager: ScratchpadManager, wheel: Path) -> None:
    pad = await manager.get_or_create("inst")
    await pad.install_packages([str(wheel)])
    await pad.reset()
    cell = await pad.execute("import sp_demo_pkg\nsp_demo_pkg.VERSION")
    assert cell.result == "'1.0'"


async def test_rebuild_restores_recorded_packages(
    workspace: Path, settings: Settings, wheel: Path
) -> None:
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        pad = await manager.get_or_create("restore")
        await pad.install_packages([str(wheel)])
        root = pad_root(manager, "restore")
    (root / venv.MARKER).unlink()  # an unverified venv is rebuilt on the next start
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        pad = await manager.get_or_create("restore")
        cell = await pad.execute("import sp_demo_pkg\nsp_demo_pkg.VERSION")
        assert cell.result == "'1.0'"
        assert "reinstalled" in cell.logs


async def test_already_installed_packages_are_skipped(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("skip")
    output = await pad.install_packages(["pytest"])  # present in the host environment
    assert output == "Already installed: pytest"
    assert not (pad_root(manager, "skip") / "requirements.txt").exists()


async def test_failed_install_says_why(manager: ScratchpadManager, tmp_path: Path) -> None:
    pad = await manager.get_or_create("fail")
    with pytest.raises(InstallError, match="failed") as caught:
        await pad.install_packages([str(tmp_path / "missing-1.0-py3-none-any.whl")])
    assert "missing-1.0" in str(caught.value)  # the installer's own output is included
    assert (await pad.execute("1")).status == "ok"


@pytest.mark.parametrize(
    "packages",
    [[], "requests", ["--index-url=http://evil"], ["two words"], [""], [3]],
)
async def test_bad_package_specs_are_refused(manager: ScratchpadManager, packages: object) -> None:
    pad = await manager.get_or_create("specs")
    with pytest.raises(InvalidInputError):
        await pad.install_packages(packages)  # type: ignore[arg-type]


async def test_stdlib_venv_fallback_runs_a_kernel(tmp_path: Path) -> None:
    import os
    import sys

    from scratchpad.runtime.kernel import KernelProcess

    root = tmp_path / "stdlib-venv"
    venv._create_with_stdlib(root)
    venv._link_host_packages(root)
    kernel = await KernelProcess.spawn(
        venv.venv_python(root), cwd=tmp_path, env=dict(os.environ), config={}, timeout=20
    )
    try:
        assert kernel.execute("c1", "import sys, pytest\nsys.prefix")
        deadline = asyncio.get_running_loop().time() + 20
        while (event := await kernel.next_event(deadline)) is not None:
            if event[0] == "msg" and event[1]["type"] == "done":
                break
        assert event is not None
        assert event[1]["status"] == "ok", event[1]["error"]
        assert event[1]["result"] == repr(str(root))
        assert sys.prefix != str(root)
    finally:
        await kernel.stop()


async def test_installer_timeout_is_reported() -> None:
    assert await venv.run_tool(["sleep", "5"], 0.2) == (None, "")


async def test_a_venv_is_built_beside_the_pad_and_a_failed_build_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "pads" / "p"
    await venv.create(root, "p")
    assert venv.read_name(root) == "p"
    activate = (root / "bin" / "activate").read_text()
    assert str(root) in activate and ".new-" not in activate  # names where it lives
    (root / "history.jsonl").write_bytes(b"kept\n")
    (root / "requirements.txt").write_text("six\n")
    before = sorted(path.relative_to(root) for path in root.rglob("*"))

    def no_space(root: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(venv, "_link_host_packages", no_space)
    with pytest.raises(OSError, match="No space left"):
        await venv.create(root, "p")
    assert sorted(path.relative_to(root) for path in root.rglob("*")) == before
    assert [entry.name for entry in root.parent.iterdir()] == ["p"]  # nothing half-made beside
    monkeypatch.undo()
    await venv.create(root, "p")
    assert (root / "history.jsonl").read_bytes() == b"kept\n"
    assert venv.read_requirements(root) == ["six"] and venv.read_name(root) == "p"
    assert [entry.name for entry in root.parent.iterdir()] == ["p"]


async def test_a_pad_half_made_by_an_earlier_version_is_rebuilt_or_removed(
    manager: ScratchpadManager,
) -> None:
    """What a failed first use left on main: a directory with part of a venv, refused by
    every exec and every cleanup."""
    for name in ("stub", "stub-2"):
        stub = pad_root(manager, name)
        (stub / "bin").mkdir(parents=True)
        (stub / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    pad = await manager.get_or_create("stub")
    assert (await pad.execute("1 + 1")).result == "2"
    await manager.remove("stub-2")
    assert not pad_root(manager, "stub-2").exists()
    stranger = pad_root(manager, "stranger")
    stranger.mkdir()
    (stranger / "notes.txt").write_text("not a pad's")
    with pytest.raises(VenvError, match="refusing to delete"):
        await venv.remove(stranger)
