"""RemoteRuntime specifics: settings, a server that goes away, refused keys."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.errors import ConfigError
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.remote import RemoteRuntime
from tests.server_helpers import running_server

KEY = "remote-key"


def test_remote_backend_needs_url_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRATCHPAD_BACKEND", "remote")
    with pytest.raises(
        ConfigError, match="needs SCRATCHPAD_REMOTE_URL and SCRATCHPAD_REMOTE_API_KEY"
    ):
        Settings.load()
    monkeypatch.setenv("SCRATCHPAD_REMOTE_URL", "http://127.0.0.1:1")
    with pytest.raises(ConfigError, match=r"remote needs SCRATCHPAD_REMOTE_API_KEY\. Fix"):
        Settings.load()
    monkeypatch.setenv("SCRATCHPAD_REMOTE_API_KEY", "k")
    manager = ScratchpadManager(settings=Settings.load())
    assert isinstance(manager._factory("main"), RemoteRuntime)


async def test_a_server_that_goes_away_gives_a_clear_cell(tmp_path: Path) -> None:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, process):
        pad = RemoteRuntime("gone", url=url, api_key=KEY)
        await pad.start()
        running = asyncio.create_task(pad.execute("import time\ntime.sleep(30)"))
        await asyncio.sleep(1.0)
        process.kill()
        cell = await asyncio.wait_for(running, 20)
    assert cell.status == "killed"
    assert cell.error is not None and "went away during this cell" in cell.error


async def test_a_wrong_key_is_a_clear_error(tmp_path: Path) -> None:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _):
        pad = RemoteRuntime("p", url=url, api_key="wrong")
        with pytest.raises(ConfigError, match="SCRATCHPAD_REMOTE_API_KEY"):
            await pad.start()
