"""A full disk loses no acknowledged work: the home on a small tmpfs, filled to the last byte.

A cell whose record cannot be written is answered saying so (never ``ok``) and the history
keeps every earlier cell; a pad first used on the full disk leaves nothing half-made; every
write that finds no space says "the disk of <home> is full" (HTTP 507), and everything works
again once space is freed. Mounting needs root (CI runs the tests as root).
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client

from scratchpad.config import Settings
from scratchpad.errors import DiskFullError
from scratchpad.memory.layout import init_agent
from scratchpad.memory.state import load_state, save_state
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.history import CellHistory
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.mcp_server import create_mcp_server
from tests.server_helpers import running_server

KEY = "full-disk-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
BIG_OUTPUT = "print('y' * 20000)\n'done'"  # a record bigger than any page left half-used


class SmallDisk:
    """A 24 MiB tmpfs at ``path``; :meth:`fill` takes its last free byte, :meth:`free`
    gives the space back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def fill(self) -> None:
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while True:
                os.write(fd, bytes(1 << 16))  # what fits, then ENOSPC
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(fd)
        assert os.statvfs(self.path).f_bavail == 0

    def free(self) -> None:
        self.filler.unlink()


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI runs the tests as root)")
    path = tmp_path / "disk"
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield SmallDisk(path)
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=True)  # a process still in it


@pytest.fixture
def workspace(disk: SmallDisk) -> Path:
    """A workspace on the small disk, and so its home (``<workspace>/.scratchpad``)."""
    path = disk.path / "workspace"
    path.mkdir()
    return path


def full(home: Path) -> str:
    """A pattern of the message every write that finds no space gives."""
    return f"the disk of {re.escape(str(home))} is full"


def frames(text: str) -> list[dict[str, Any]]:
    blocks = [b for b in text.replace("\r\n", "\n").split("\n\n") if b.startswith("data: ")]
    return [json.loads(b.removeprefix("data: ")) for b in blocks]


async def test_a_cell_whose_record_cannot_be_written_says_so_and_loses_no_earlier_cell(
    disk: SmallDisk, workspace: Path, settings: Settings
) -> None:
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        home = manager.settings.home
        pad = await manager.get_or_create("p")
        earlier = [await pad.execute(f"{i} * 2") for i in range(3)]
        assert [cell.status for cell in earlier] == ["ok"] * 3
        disk.fill()
        unstored = await pad.execute(BIG_OUTPUT)
        assert unstored.status == "error"
        assert re.search(f"could not be stored: {full(home)}", str(unstored.error))
        assert unstored.stdout.startswith("yyy") and unstored.result == "'done'"  # it ran
        history = home / "pads" / "p" / "history.jsonl"
        assert history.read_bytes().endswith(b"\n")  # the failed append was taken back
        assert [c.code for c in CellHistory(history, 1 << 20).load()] == [c.code for c in earlier]
        disk.free()
        after = await pad.execute("'after'")
        assert after.status == "ok"
    cells = await ScratchpadManager(workspace=workspace, settings=settings).peek("p").load_cells()
    assert [cell.code for cell in cells] == [*(cell.code for cell in earlier), "'after'"]


async def test_a_pad_first_used_on_a_full_disk_leaves_nothing_and_works_once_space_is_back(
    disk: SmallDisk, workspace: Path, settings: Settings
) -> None:
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        home = manager.settings.home
        await (await manager.get_or_create("first")).execute("1")
        disk.fill()
        with pytest.raises(DiskFullError, match=full(home)):
            await manager.get_or_create("fresh")
        assert sorted(entry.name for entry in (home / "pads").iterdir()) == ["first"]
        assert manager.names_on_disk() == ["first"]
        disk.free()
        pad = await manager.get_or_create("fresh")
        assert (await pad.execute("1 + 1")).result == "2"
        await manager.remove("fresh")
        assert sorted(entry.name for entry in (home / "pads").iterdir()) == ["first"]


async def test_over_mcp_an_unstored_cell_and_an_unmade_pad_say_the_disk_is_full(
    disk: SmallDisk, workspace: Path, settings: Settings
) -> None:
    with ObservationStore(workspace / "obs.db", settings=settings) as store:
        async with (
            ScratchpadManager(workspace=workspace, settings=settings) as manager,
            Client(create_mcp_server(manager, store)) as client,
        ):
            home = manager.settings.home
            await client.call_tool("scratchpad", {"action": "exec", "name": "p", "code": "1"})
            disk.fill()
            unstored = await client.call_tool(
                "scratchpad", {"action": "exec", "name": "p", "code": BIG_OUTPUT}
            )
            unmade = await client.call_tool(
                "scratchpad", {"action": "exec", "name": "fresh", "code": "1"}
            )
            disk.free()
            made = await client.call_tool(
                "scratchpad", {"action": "exec", "name": "fresh", "code": "40 + 2"}
            )
    assert unstored.is_error and re.search(f"could not be stored: {full(home)}", texts(unstored))
    assert unmade.is_error and re.search(full(home), texts(unmade))
    assert not made.is_error and "42" in texts(made)


def texts(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def test_over_http_and_the_cli_a_full_disk_answers_507_and_everything_works_after(
    disk: SmallDisk, tmp_path: Path
) -> None:
    home = disk.path / "home"
    env = {**os.environ, "SCRATCHPAD_HOME": str(home), "SCRATCHPAD_API_KEY": KEY}
    source = {"engine": "postgres", "fields": {"host": "db", "password": "a-long-password-1"}}
    with (
        running_server(home, tmp_path, KEY) as (url, _process),
        httpx.Client(base_url=url, headers=AUTH, timeout=120) as http,
    ):
        assert http.post("/v1/datasources", json={**source, "name": "one"}).status_code == 200
        ran = http.post("/scratchpad/execute-stream", json={"name": "p", "code": "1"})
        assert frames(ran.text)[-1]["cell"]["status"] == "ok"
        disk.fill()

        unstored = http.post("/scratchpad/execute-stream", json={"name": "p", "code": BIG_OUTPUT})
        cell = frames(unstored.text)[-1]["cell"]
        assert cell["status"] == "error" and re.search(full(home), cell["error"])
        for path, body in [
            ("/scratchpad/start", {"name": "fresh"}),
            ("/v1/datasources", {**source, "name": "two"}),
        ]:
            refused = http.post(path, json=body)
            assert refused.status_code == 507, refused.text
            assert refused.json()["type"] == "DiskFullError"
            assert re.search(full(home), refused.json()["error"])
        cli = [sys.executable, "-m", "scratchpad.cli"]
        executed = subprocess.run(
            [*cli, "exec", "p", BIG_OUTPUT], env=env, capture_output=True, text=True, timeout=90
        )
        assert re.search(f"could not be stored: {full(home)}", executed.stdout + executed.stderr)
        added = subprocess.run(
            [*cli, "vault", "add", "postgres", "three", "--stdin"],
            input=json.dumps(source["fields"]),
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert added.returncode != 0 and re.search(f"error: {full(home)}", added.stderr)
        disk.free()

        started = http.post("/scratchpad/start", json={"name": "fresh"})
        assert started.status_code == 200, started.text
        fresh = http.post("/scratchpad/execute-stream", json={"name": "fresh", "code": "6 * 7"})
        assert frames(fresh.text)[-1]["cell"]["result"] == "42"
        assert http.post("/scratchpad/cleanup", json={"name": "fresh"}).status_code == 200
        assert http.post("/v1/datasources", json={**source, "name": "two"}).status_code == 200
        names = [entry["name"] for entry in http.get("/v1/datasources").json()["datasources"]]
        assert names == ["one", "two"]


def test_an_observation_put_on_a_full_disk_raises_and_works_after(disk: SmallDisk) -> None:
    home = disk.path / "home"
    with ObservationStore(settings=Settings(home=home)) as store:
        first = store.put("x" * 1000, turn_id="t")
        disk.fill()
        with pytest.raises(DiskFullError, match=full(home)):
            store.put("y" * 300_000, turn_id="t")
        assert [entry.id for entry in store.list_for_turn("t")] == [first]
        disk.free()
        second = store.put("y" * 300_000, turn_id="t")
        assert store.get(second, turn_id="t").content == "y" * 300_000
        assert store.get(first, turn_id="t").content == "x" * 1000


def test_agent_state_on_a_full_disk_keeps_the_old_file_and_saves_after(disk: SmallDisk) -> None:
    paths, _ = init_agent(disk.path / "agent")
    state = load_state(paths.active)
    disk.fill()
    bigger = {**state, "notes": "n" * 100_000}
    with pytest.raises(DiskFullError, match=full(paths.active.parent)):
        save_state(paths.active, bigger)
    assert load_state(paths.active) == state
    assert [p.name for p in paths.active.parent.glob(".*.tmp")] == []  # nothing half-written
    disk.free()
    save_state(paths.active, bigger)
    assert load_state(paths.active)["notes"] == "n" * 100_000
