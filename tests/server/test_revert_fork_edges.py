"""revert and fork on every edge: HTTP (a real server: ``POST /scratchpad/revert``,
``POST /v1/pads/{name}/fork``, and the remote backend over them), the MCP ``scratchpad``
tool's ``revert`` and ``fork`` actions through the official SDK client."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError
from scratchpad.runtime.remote import RemoteRuntime
from scratchpad.runtime.remote_http import RemoteServer
from tests.server.test_mcp import connected, run, texts
from tests.server_helpers import running_server

KEY = "revert-fork-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    with running_server(tmp_path / "home", tmp_path, KEY) as running:
        yield running


async def test_http_revert_and_fork(server: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = server
    pad = RemoteRuntime("web", url=url, api_key=KEY)
    async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=60) as http:
        try:
            assert (await pad.execute("a = [1, 2, 3]")).status == "ok"
            nothing = await http.post("/scratchpad/revert", json={"name": "web"})
            assert nothing.status_code == 400
            assert nothing.json()["type"] == "InvalidInputError"
            assert "nothing to revert" in nothing.json()["error"]
            assert (await pad.execute("a.append(4)")).status == "ok"
            answer = await http.post("/scratchpad/revert", json={"name": "web"})
            assert answer.status_code == 200, answer.text
            assert answer.json() == {"ok": True, "reverted": True, "after_cell": 1}
            after = await pad.execute("a")
            assert after.result == "[1, 2, 3]"
            assert "namespace reverted to after cell 1" in after.logs
            gone = await http.post("/scratchpad/revert", json={"name": "no-such-pad"})
            assert gone.json() == {"ok": True, "reverted": False, "after_cell": None}

            forked = await http.post("/v1/pads/web/fork", json={"to": "web-2"})
            assert forked.status_code == 201, forked.text
            assert forked.json()["name"] == "web-2" and forked.json()["status"] == "asleep"
            assert forked.json()["cells"] == 3
            again = await http.post("/v1/pads/web/fork", json={"to": "web-2"})
            assert again.status_code == 400 and "exists already" in again.json()["error"]
            bad = await http.post("/v1/pads/web/fork", json={"to": "bad\x07name"})
            assert bad.status_code in (400, 422)
            listed = {p["name"]: p["status"] for p in (await http.get("/v1/pads")).json()["pads"]}
            assert listed["web-2"] == "asleep"
            copy = RemoteRuntime("web-2", url=url, api_key=KEY)
            try:
                cell = await copy.execute("a.append(5)\na")
                assert cell.result == "[1, 2, 3, 5]" and cell.number == 4
            finally:
                await copy.detach()
            assert (await pad.execute("a")).result == "[1, 2, 3]"  # the source: its own

            # the remote backend: revert over HTTP, fork through the server's route
            assert (await pad.execute("a.append(6)")).status == "ok"
            assert await pad.revert() == 1
            info = await RemoteServer(url, KEY).fork("web", "web-3")
            assert (info.name, info.status) == ("web-3", "asleep")
            with pytest.raises(InvalidInputError, match="exists already"):
                await RemoteServer(url, KEY).fork("web", "web-3")
        finally:
            await pad.detach()


async def test_mcp_revert_and_fork_actions(settings: Settings, workspace: Path) -> None:
    async with connected(settings, workspace) as client:
        nothing = await client.call_tool("scratchpad", {"action": "revert", "name": "m"})
        assert nothing.is_error and "no pad named 'm'" in texts(nothing)
        assert not (await client.call_tool("scratchpad", run("m", "a = [1]"))).is_error
        assert not (await client.call_tool("scratchpad", run("m", "a.append(2)"))).is_error
        reverted = await client.call_tool("scratchpad", {"action": "revert", "name": "m"})
        assert not reverted.is_error, texts(reverted)
        assert "as they were after cell 1" in texts(reverted)
        shown = await client.call_tool("scratchpad", run("m", "a"))
        assert "[result]\n[1]" in texts(shown)
        empty = await client.call_tool("scratchpad", {"action": "revert", "name": "m"})
        assert empty.is_error and "nothing to revert" in texts(empty)

        no_target = await client.call_tool("scratchpad", {"action": "fork", "name": "m"})
        assert no_target.is_error and "fork needs `to`" in texts(no_target)
        forked = await client.call_tool("scratchpad", {"action": "fork", "name": "m", "to": "m2"})
        assert not forked.is_error, texts(forked)
        assert "forked into 'm2' (3 cells, asleep)" in texts(forked)
        listed = texts(await client.call_tool("scratchpad", {"action": "list"}))
        assert "'m2': asleep" in listed
        copied = await client.call_tool("scratchpad", run("m2", "a + [3]"))
        assert "[result]\n[1, 3]" in texts(copied)
        listed_tools = await client.list_tools()
    schema = {t.name: t for t in listed_tools.tools}["scratchpad"].input_schema
    assert {"revert", "fork"} <= set(schema["properties"]["action"]["enum"])
    assert "to" in schema["properties"]
