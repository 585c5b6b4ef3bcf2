"""The MCP Tasks extension (``io.modelcontextprotocol/tasks``): a long ``exec`` of a client
that opts in becomes a task it polls with ``tasks/get`` and cancels with ``tasks/cancel``;
clients that do not opt in get plain results. Driven by the official MCP client, which opts
in through a ``ClientExtension`` that claims ``resultType: "task"`` (the SDK has the
extension points, no tasks client of its own), in-process and over streamable HTTP, and by
hand: raw JSON-RPC over streamable HTTP."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Literal

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS
from pydantic import ConfigDict, Field

from scratchpad.config import Settings
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.mcp_server import create_mcp_server
from tests.server.test_mcp import KEY, run, texts
from tests.server.test_mcp_cells import call, gated
from tests.server_helpers import running_server

TASKS = "io.modelcontextprotocol/tasks"
SLOW = "import time\ntime.sleep(1.5)\n7"  # longer than a cell answered without a task


class CreatedTask(types.Result):
    """A ``CreateTaskResult`` as the spec draws it."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class Answer(types.Result):
    """Any answer, its fields as sent."""

    model_config = ConfigDict(extra="allow")


class TaskRef(types.RequestParams):
    task_id: str


class TaskRequest(types.Request[TaskRef, Literal["tasks/get", "tasks/cancel"]]):
    name_param = "taskId"  # the spec's Mcp-Name header on streamable HTTP


async def task_call(session: ClientSession, method: str, task_id: str) -> dict[str, Any]:
    request = TaskRequest(method=method, params=TaskRef(task_id=task_id))
    answer = await session.send_request(request, Answer)
    return answer.model_dump(by_alias=True, exclude_none=True)


async def poll(session: ClientSession, task_id: str, until: set[str]) -> dict[str, Any]:
    """``tasks/get`` until the task's status is one of ``until`` (30 s at most)."""
    deadline = time.monotonic() + 30
    while True:
        task = await task_call(session, "tasks/get", task_id)
        if task["status"] in until:
            return task
        assert task["status"] == "working" and time.monotonic() < deadline, task
        await asyncio.sleep(0.1)


async def resolve(created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
    """What a tasks client does with a task: poll it to its end, answer its result."""
    task = await poll(ctx.session, created.task_id, {"completed", "cancelled", "failed"})
    assert task["status"] == "completed", task
    return types.CallToolResult.model_validate(task["result"])


class Tasks(ClientExtension):
    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=resolve)]


class RawClient:
    """JSON-RPC over streamable HTTP by hand (2026-07-28: each request carries its own
    protocol version and capabilities in ``_meta``, and its method in headers)."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url, self.sent = http, url, 0

    async def call(
        self, method: str, params: dict[str, Any], *, tasks: bool = False
    ) -> dict[str, Any]:
        extensions: dict[str, Any] = {TASKS: {}} if tasks else {}
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
        }
        headers = {
            "Authorization": f"Bearer {KEY}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": method,
            "Mcp-Name": str(params.get("name") or params.get("taskId")),
        }
        self.sent += 1
        body = {"jsonrpc": "2.0", "id": self.sent, "method": method,
                "params": {**params, "_meta": meta}}  # fmt: skip
        answer = await self.http.post(self.url, json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        return dict(answer.json()["result"])


async def exec_call(client: Client, arguments: dict[str, object]) -> types.Result:
    """The exec's answer as it comes (a task or a result); a cell waiting on a file that no
    one creates yet must come back as a task, not hang the test."""
    async with asyncio.timeout(30):
        return await client.session.call_tool("scratchpad", arguments, allow_claimed=True)


async def test_a_long_exec_becomes_a_task_polled_to_the_result_a_plain_exec_gives(
    settings: Settings, workspace: Path, scratch: Path
) -> None:
    with ObservationStore(workspace / "obs.db", settings=settings) as store:
        async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
            server = create_mcp_server(manager, store)
            async with Client(server, extensions=[Tasks()]) as client:
                advertised = client.server_capabilities.extensions or {}
                quick = await exec_call(client, run("p", "x = 41\nx + 1"))
                created = await exec_call(client, {**run("p", gated(scratch)), "cell_id": "t1"})
                assert isinstance(created, CreatedTask), created
                working = await task_call(client.session, "tasks/get", created.task_id)
                (scratch / "go").touch()
                done = await poll(client.session, created.task_id, {"completed"})
                failed, waited = await call(client, "wait", "p", cell_id="t1")
                transparent = await client.call_tool("scratchpad", run("p", gated(scratch)))
                raising = gated(scratch, "go-on") + "\nraise ValueError('boom')"
                failing = await exec_call(client, run("p", raising))
                assert isinstance(failing, CreatedTask), failing
                (scratch / "go-on").touch()
                failed_task = await poll(client.session, failing.task_id, {"completed"})
                refused = await exec_call(client, {"action": "exec", "name": "p", "code": ""})
                with pytest.raises(MCPError) as unknown:
                    await task_call(client.session, "tasks/get", "nothing.cA")
            async with Client(server) as plain:  # no extension: a plain result, as ever
                slow = await plain.call_tool("scratchpad", run("p", SLOW))
                same = await plain.call_tool("scratchpad", run("p", gated(scratch)))
    assert advertised == {TASKS: {}}
    assert isinstance(quick, types.CallToolResult) and "[result]\n42" in texts(quick)
    assert created.status == "working" and created.poll_interval_ms and created.ttl_ms is None
    assert created.task_id.startswith("t1.") and created.created_at.endswith("Z")
    assert working["status"] == "working" and working["taskId"] == created.task_id
    assert working["statusMessage"].startswith(("queued", "running")), working
    assert done["status"] == "completed" and done["resultType"] == "complete", done
    result = types.CallToolResult.model_validate(done["result"])
    assert not result.is_error and not failed
    assert texts(result) == waited and "'finished'" in waited  # the answer exec gives
    assert (result.content, result.is_error) == (same.content, same.is_error)
    assert "[output]\nbegun" in texts(same)
    errored = types.CallToolResult.model_validate(failed_task["result"])
    assert errored.is_error and "ValueError: boom" in texts(errored), failed_task
    assert not transparent.is_error and "'finished'" in texts(transparent)
    assert isinstance(refused, types.CallToolResult) and refused.is_error
    assert "No code received" in texts(refused)
    assert unknown.value.code == INVALID_PARAMS and "unknown task" in unknown.value.message
    assert isinstance(slow, types.CallToolResult) and "[result]\n7" in texts(slow)


async def test_tasks_cancel_stops_the_cell_and_the_task_ends_cancelled(
    settings: Settings, workspace: Path, scratch: Path
) -> None:
    with ObservationStore(workspace / "obs.db", settings=settings) as store:
        async with (
            ScratchpadManager(workspace=workspace, settings=settings) as manager,
            Client(create_mcp_server(manager, store), extensions=[Tasks()]) as client,
        ):
            assert not (await client.call_tool("scratchpad", run("p", "x = 1"))).is_error
            created = await exec_call(client, run("p", gated(scratch, "never")))
            assert isinstance(created, CreatedTask), created
            ack = await task_call(client.session, "tasks/cancel", created.task_id)
            ended = await poll(client.session, created.task_id, {"cancelled", "completed"})
            after = await client.call_tool("scratchpad", run("p", "x + 1"))
    assert ack == {"resultType": "complete"} or set(ack) <= {"resultType", "_meta"}, ack
    assert ended["status"] == "cancelled" and "result" not in ended, ended
    assert "cancelled" in ended["statusMessage"].lower(), ended
    assert "[result]\n2" in texts(after)  # interrupted, variables kept


async def test_a_task_outlives_its_connection_over_streamable_http(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    headers = {"Authorization": f"Bearer {KEY}"}
    with running_server(tmp_path / "home", tmp_path, KEY, workspace=workspace) as (url, _):

        def connect(*extensions: ClientExtension) -> Client:
            http = httpx2.AsyncClient(headers=headers, timeout=60)
            return Client(streamable_http_client(f"{url}/mcp", http_client=http),
                          extensions=list(extensions))  # fmt: skip

        async with connect(Tasks()) as first:
            created = await exec_call(first, run("p", gated(workspace)))
        assert isinstance(created, CreatedTask), created  # and the first client is gone
        async with connect(Tasks()) as second:
            working = await task_call(second.session, "tasks/get", created.task_id)
            (workspace / "go").touch()
            done = await poll(second.session, created.task_id, {"completed"})
        async with connect() as plain:
            slow = await plain.call_tool("scratchpad", run("p", SLOW))
        async with httpx.AsyncClient(timeout=60) as http:  # the wire, as any client sends it
            rpc = RawClient(http, f"{url}/mcp")
            slow_call = {"name": "scratchpad", "arguments": run("p", SLOW)}
            raw = await rpc.call("tools/call", slow_call, tasks=True)
            raw_done = await rpc.call("tasks/get", {"taskId": raw["taskId"]}, tasks=True)
            deadline = time.monotonic() + 30
            while raw_done["status"] == "working" and time.monotonic() < deadline:
                await asyncio.sleep(raw_done["pollIntervalMs"] / 1000)
                raw_done = await rpc.call("tasks/get", {"taskId": raw["taskId"]}, tasks=True)
            raw_plain = await rpc.call("tools/call", slow_call)
    assert working["status"] == "working", working
    assert raw["resultType"] == "task" and raw["status"] == "working", raw
    assert {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} <= set(raw)
    assert raw_done["resultType"] == "complete" and raw_done["status"] == "completed", raw_done
    assert raw_done["result"]["content"][0]["text"] == "[result]\n7", raw_done
    assert raw_plain["resultType"] == "complete" and "taskId" not in raw_plain, raw_plain
    assert raw_plain["content"][0]["text"] == "[result]\n7", raw_plain
    assert "'finished'" in texts(types.CallToolResult.model_validate(done["result"]))
    assert not slow.is_error and "[result]\n7" in texts(slow)


async def test_a_client_that_gives_up_before_its_task_is_answered_cancels_the_cell(
    settings: Settings, workspace: Path, scratch: Path
) -> None:
    """No task id reached the client, so nobody could ever cancel the cell: it is cancelled,
    as a plain exec's cell is when its caller gives up."""
    with ObservationStore(workspace / "obs.db", settings=settings) as store:
        async with (
            ScratchpadManager(workspace=workspace, settings=settings) as manager,
            Client(create_mcp_server(manager, store), extensions=[Tasks()]) as client,
        ):
            assert not (await client.call_tool("scratchpad", run("p", "1"))).is_error
            gave_up = {**run("p", gated(scratch, "never")), "cell_id": "left"}
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.5):
                    await client.session.call_tool("scratchpad", gave_up, allow_claimed=True)
            deadline = time.monotonic() + 20
            while True:
                _, answer = await call(client, "peek", "p", cell_id="left")
                if "Cell cancelled" in answer or "has no cell" in answer:
                    break
                assert time.monotonic() < deadline, answer
                await asyncio.sleep(0.1)
            listed = await client.call_tool("scratchpad", {"action": "list"})
    assert "'p': idle" in texts(listed)  # nothing runs on
