"""A pad's resource request (its placement on a Ray cluster) at every edge of a real
``scratchpad serve`` on loopback: ``POST /scratchpad/start``, a client's RemoteRuntime and
the MCP tool. The server here runs pads locally, so each edge must say that resources need
SCRATCHPAD_BACKEND=ray (a 400, not a 500), start nothing and lose nothing; a malformed
request is told what is wrong; a request without resources is answered as it always was.
(The Ray path itself is tested on a cluster with the Ray backend.)"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.remote import RemoteRuntime
from tests.server.test_mcp import texts
from tests.server_helpers import running_server, serving

KEY = "resources-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
STREAM = "/scratchpad/execute-stream"
NEEDS_RAY = "need SCRATCHPAD_BACKEND=ray; these pads run with SCRATCHPAD_BACKEND=local"
BAD: list[tuple[object, str]] = [  # a malformed request, and what it is told (on any backend)
    ("lots", "resources must be an object such as {'cpus': 1"),
    ({"cpus": -1}, "cpus must be a number >= 0, not '-1'"),
    ({"cpu": 1}, "unknown resource(s) 'cpu': use cpus, gpus, memory_mb, custom"),
    ({"custom": 3}, "resources.custom must be an object of resource names to amounts"),
    ({"custom": {"gpu_node": -1}}, "custom resource 'gpu_node' must be a number >= 0"),
]


def cell_of(answer: httpx.Response) -> dict[str, Any]:
    frames = [line for line in answer.text.splitlines() if line.startswith("data: ")]
    cell: dict[str, Any] = json.loads(frames[-1].removeprefix("data: "))["cell"]
    return cell


async def test_a_start_asking_for_resources_is_a_400_and_starts_or_loses_nothing(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    with running_server(home, tmp_path, KEY) as (url, _process):
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=60) as http:
            ran = await http.post(STREAM, json={"name": "kept", "code": "x = 41"})
            assert cell_of(ran)["status"] == "ok"
            for name in ("new", "kept"):
                asked = {"cpus": 1, "custom": {"gpu_node": 1}}
                body: dict[str, object] = {"name": name, "resources": asked}
                refused = await http.post("/scratchpad/start", json=body)
                assert refused.status_code == 400, refused.text
                assert refused.json()["type"] == "InvalidInputError"
                assert NEEDS_RAY in refused.json()["error"]
            for resources, words in BAD:
                body = {"name": "new", "resources": resources}
                bad = await http.post("/scratchpad/start", json=body)
                assert (bad.status_code, bad.json()["type"]) == (400, "InvalidInputError"), bad.text
                assert words in bad.json()["error"]
            listed = (await http.get("/v1/pads")).json()["pads"]
            after = await http.post(STREAM, json={"name": "kept", "code": "x + 1"})
    assert [pad["name"] for pad in listed] == ["kept"]  # "new" was never made
    assert not (home / "pads" / "new").exists()
    assert cell_of(after)["result"] == "42"  # the running pad kept its variables


async def test_a_start_without_resources_is_answered_as_before(tmp_path: Path) -> None:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _process):
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=60) as http:
            plain = await http.post("/scratchpad/start", json={"name": "p"})
            null = await http.post("/scratchpad/start", json={"name": "p", "resources": None})
    assert (plain.status_code, plain.content) == (200, b'{"ok":true}')
    assert (null.status_code, null.content) == (200, b'{"ok":true}')


class Recorder(BaseHTTPRequestHandler):
    """A pad server that records the bodies of its starts and answers ``{"ok": true}``."""

    starts: ClassVar[list[dict[str, Any]]] = []
    lock = threading.Lock()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/scratchpad/start":
            with self.lock:
                self.starts.append(body)
        answer = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        return None


async def test_a_remote_pads_resources_travel_with_its_start_and_only_when_asked(
    tmp_path: Path,
) -> None:
    Recorder.starts = []
    with serving(Recorder) as url:
        plain = RemoteRuntime("plain", url=url, api_key=KEY)
        await plain.start()
        await plain.detach()
        settings = Settings(home=tmp_path / "home", backend="remote", remote_url=url,
                            remote_api_key=KEY)  # fmt: skip
        async with ScratchpadManager(settings=settings) as manager:
            asked = {"cpus": 2, "custom": {"gpu_node": 1}}
            await manager.get_or_create("placed", resources=asked)
            with pytest.raises(InvalidInputError, match=r"unknown resource\(s\) 'ram'"):
                await manager.get_or_create("bad", resources={"ram": 1})  # said before sending
    assert Recorder.starts == [
        {"name": "plain"},  # a server that never heard of resources sees what it always did
        {"name": "placed", "resources": {"cpus": 2, "custom": {"gpu_node": 1}}},
    ]


async def test_a_remote_pad_hears_its_servers_refusal_of_resources(tmp_path: Path) -> None:
    with running_server(tmp_path / "server", tmp_path, KEY) as (url, _process):
        settings = Settings(home=tmp_path / "client", backend="remote", remote_url=url,
                            remote_api_key=KEY)  # fmt: skip
        async with ScratchpadManager(settings=settings) as manager:
            with pytest.raises(InvalidInputError, match="need SCRATCHPAD_BACKEND=ray") as refused:
                await manager.get_or_create("p", resources={"gpus": 1})
            assert "these pads run with SCRATCHPAD_BACKEND=local" in str(refused.value)
            assert manager.names() == [] and await manager.list_pads() == []
            pad = await manager.get_or_create("p")  # without: the pad starts as it always did
            assert (await pad.execute("1 + 1")).result == "2"


def call(action: str, **fields: Any) -> dict[str, Any]:
    return {"action": action, "name": "p", **fields}


async def test_the_mcp_tool_takes_resources_and_says_what_is_wrong(tmp_path: Path) -> None:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _process):
        async with (
            httpx2.AsyncClient(headers=AUTH, timeout=60) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
        ):
            listed = await client.list_tools()
            schema = next(t.input_schema for t in listed.tools if t.name == "scratchpad")
            placed: dict[str, types.CallToolResult] = {}
            for action in ("exec", "start"):
                asked = call(action, code="made = 1", resources={"cpus": 1})
                placed[action] = await client.call_tool("scratchpad", asked)
            bad = []
            for resources, _words in BAD:
                asked = call("exec", code="made = 1", resources=resources)
                bad.append(await client.call_tool("scratchpad", asked))
            nothing = texts(await client.call_tool("scratchpad", {"action": "list"}))
            empty = await client.call_tool("scratchpad", call("exec", code="1 + 1", resources={}))
    documented = schema["properties"]["resources"]
    assert set(documented["properties"]) == {"cpus", "gpus", "memory_mb", "custom"}
    assert "SCRATCHPAD_BACKEND=ray" in documented["description"]
    for action, result in placed.items():
        assert result.is_error and NEEDS_RAY in texts(result), (action, texts(result))
    assert "field 'resources' must be of type object, not str" in texts(bad[0])
    for result, (_resources, words) in zip(bad[1:], BAD[1:], strict=True):
        assert result.is_error and words in texts(result), texts(result)
    assert nothing == "No pads yet: exec creates one."  # no refused call started a pad
    assert not empty.is_error and "[result]\n2" in texts(empty)  # {}: a strict client's "none"
