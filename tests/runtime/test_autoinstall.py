"""Opt-in install of what a cell failed to import (``SCRATCHPAD_AUTO_INSTALL=1``), from a
local directory of wheels (no network)."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from scratchpad.config import Settings
from scratchpad.runtime import autoinstall, venv
from scratchpad.runtime.cell import Cell, ProgressEvent
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from tests.conftest import build_wheel


@pytest.fixture
async def auto(
    workspace: Path, settings: Settings, readable_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ScratchpadManager]:
    """A manager whose pads install missing modules from ``readable_dir`` (sklearn there)."""
    build_wheel(readable_dir, "scikit_learn", module="sklearn", body="NAME = 'fake sklearn'\n")
    monkeypatch.setenv("UV_FIND_LINKS", str(readable_dir))
    monkeypatch.setenv("UV_NO_INDEX", "1")
    mgr = ScratchpadManager(
        workspace=workspace, settings=settings.model_copy(update={"auto_install": True})
    )
    yield mgr
    await mgr.close_all()


async def test_a_missing_module_is_installed_and_the_cell_runs_again(
    auto: ScratchpadManager,
) -> None:
    pad = await auto.get_or_create("p")
    items = [
        i async for i in pad.execute_streaming("print('before')\nimport sklearn\nsklearn.NAME")
    ]
    assert ProgressEvent("installing scikit-learn…") in items  # the caller hears of the install
    cell = items[-1]
    assert isinstance(cell, Cell)
    assert (cell.status, cell.result, cell.error) == ("ok", "'fake sklearn'", None)
    assert cell.stdout == "before\n"  # the second run's output only
    assert cell.logs.startswith(
        "No module named 'sklearn': installed scikit-learn (SCRATCHPAD_AUTO_INSTALL) and ran "
        "the cell again."
    )
    assert [c.id for c in await pad.load_cells()] == [cell.id]  # one record: the second run
    assert isinstance(pad, LocalRuntime)
    assert "scikit-learn" in venv.read_requirements(pad.root)  # a rebuilt venv has it too
    again = await pad.execute("import sklearn\n1")
    assert (again.status, again.logs) == ("ok", "")


async def test_an_install_that_fails_leaves_the_error_and_says_why(
    auto: ScratchpadManager,
) -> None:
    pad = await auto.get_or_create("p")
    cell = await pad.execute("import nosuchthing_here")
    assert cell.status == "error"
    assert "No module named 'nosuchthing_here'" in (cell.error or "")
    assert cell.logs.startswith("Installing nosuchthing_here for 'nosuchthing_here' failed: ")
    assert len(await pad.load_cells()) == 1


async def test_a_package_without_the_module_is_not_installed_twice(
    auto: ScratchpadManager,
) -> None:
    pad = await auto.get_or_create("p")
    await pad.install_packages(["scikit-learn"])
    cell = await pad.execute("import sklearn.nothing_here")
    assert cell.status == "error"
    assert cell.logs == (
        "scikit-learn (for 'sklearn.nothing_here') is installed already; it has no such module."
    )


async def test_without_the_setting_nothing_is_installed(
    workspace: Path, settings: Settings, readable_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_wheel(readable_dir, "scikit_learn", module="sklearn")
    monkeypatch.setenv("UV_FIND_LINKS", str(readable_dir))
    mgr = ScratchpadManager(workspace=workspace, settings=settings)
    try:
        cell = await (await mgr.get_or_create("p")).execute("import sklearn")
    finally:
        await mgr.close_all()
    assert cell.status == "error" and cell.logs == ""


@pytest.mark.parametrize(
    ("module", "package"),
    [
        ("cv2", "opencv-python"),
        ("sklearn.linear_model", "scikit-learn"),
        ("PIL", "pillow"),
        ("yaml", "PyYAML"),
        ("bs4", "beautifulsoup4"),
        ("requests", "requests"),
        ("tomllib", None),  # the standard library: nothing to install
        ("_private", None),
        ("has space", None),  # not a PEP 508 name
        ("-r", None),
    ],
)
def test_import_names_map_to_packages(module: str, package: str | None) -> None:
    assert autoinstall.package_for(module) == package


def test_only_a_cell_that_ended_on_the_missing_module_asks() -> None:
    error = "Traceback (most recent call last):\n  ...\nModuleNotFoundError: No module named 'x'\n"
    assert autoinstall.missing_module(Cell("import x", error=error, status="error")) == "x"
    caught = Cell("1", error=error + "\nDuring handling...\nValueError: v", status="error")
    assert autoinstall.missing_module(caught) is None


@contextlib.contextmanager
def held_index(wheels: Path) -> Iterator[tuple[str, threading.Event, threading.Event]]:
    """A find-links page on loopback that answers only once ``release`` is set; ``asked`` is
    set when the installer first asks (the install is under way then)."""
    asked, release = threading.Event(), threading.Event()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(wheels), **kwargs)

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            asked.set()
            release.wait(30)
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", asked, release
    finally:
        release.set()
        server.shutdown()
        server.server_close()


async def test_a_cell_cancelled_while_its_package_installs_does_not_run_again(
    workspace: Path, settings: Settings, readable_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_wheel(readable_dir, "scikit_learn", module="sklearn")
    with held_index(readable_dir) as (url, asked, release):
        monkeypatch.delenv("UV_OFFLINE")
        monkeypatch.setenv("UV_FIND_LINKS", url)
        monkeypatch.setenv("UV_NO_INDEX", "1")
        mgr = ScratchpadManager(
            workspace=workspace, settings=settings.model_copy(update={"auto_install": True})
        )
        try:
            pad = await mgr.get_or_create("p")
            running = asyncio.create_task(pad.execute("import sklearn\nprint('ran again')"))
            assert await asyncio.to_thread(asked.wait, 30)
            assert await pad.cancel()
            release.set()
            cell = await asyncio.wait_for(running, 60)
        finally:
            await mgr.close_all()
    assert cell.status == "cancelled" and cell.stdout == ""
