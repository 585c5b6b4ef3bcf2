"""RemoteRuntime specifics: settings, a server that goes away, refused keys."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from scratchpad.config import Settings
from scratchpad.errors import (
    ConfigError,
    InvalidInputError,
    PadError,
    PadNotFoundError,
    UnauthorizedError,
)
from scratchpad.events import FeedOutput
from scratchpad.runtime.cell import Cell, OutputEvent, ProgressEvent
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.remote import RemoteRuntime
from tests.server_helpers import Relay, free_port, running_server

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
    assert isinstance(manager.backend.build("main"), RemoteRuntime)


async def test_a_server_that_goes_away_is_a_clear_error_never_a_made_up_cell(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, process):
        pad = RemoteRuntime("gone", url=url, api_key=KEY, reconnect_s=1.0)
        await pad.start()
        running = asyncio.create_task(pad.execute("import time\ntime.sleep(30)"))
        await asyncio.sleep(1.0)
        process.kill()
        with pytest.raises(PadError, match="went away during this cell") as raised:
            await asyncio.wait_for(running, 20)
    assert "SCRATCHPAD_RECONNECT_S" in str(raised.value)
    assert pad.cells == []  # no cell made up here


async def test_a_wrong_key_is_a_clear_error(tmp_path: Path) -> None:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _):
        pad = RemoteRuntime("p", url=url, api_key="wrong")
        with pytest.raises(UnauthorizedError, match="SCRATCHPAD_REMOTE_API_KEY"):
            await pad.start()


def foreign_server(stream: list[bytes], *, stay_open: bool = False) -> httpx.AsyncClient:
    """A server written elsewhere: only the DESIGN.md protocol, frames as given."""

    async def body() -> AsyncIterator[bytes]:
        for chunk in stream:
            yield chunk
        if stay_open:
            await asyncio.Event().wait()

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/scratchpad/execute-stream" and request.method == "POST":
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=body()
            )
        if request.url.path.startswith("/scratchpad/"):
            return httpx.Response(200, json={"ok": True})
        return httpx.Response(404, json={"detail": "Not Found"})

    return httpx.AsyncClient(base_url="http://elsewhere", transport=httpx.MockTransport(handle))


def on(server: httpx.AsyncClient) -> RemoteRuntime:
    pad = RemoteRuntime("p", url="http://elsewhere", api_key=KEY)
    pad._client = server
    return pad


async def test_unknown_frames_and_comments_are_skipped_and_an_open_stream_does_not_hang() -> None:
    cell = json.dumps({"type": "cell", "cell": {"code": "1", "status": "ok", "result": "1"}})
    stream = [
        b": hello\n\n",
        b'data: {"type": "news"}\n\n',
        b'data: {"type": "progress", "message": "m"}\n\n',
        f"data: {cell}\n\n".encode(),
    ]
    pad = on(foreign_server(stream, stay_open=True))
    items = await asyncio.wait_for(_collect(pad), 10)
    assert items[0] == ProgressEvent("m")
    assert isinstance(items[1], Cell) and items[1].result == "1" and len(items) == 2


async def test_a_malformed_frame_on_a_server_without_cell_events_is_a_clear_error() -> None:
    pad = on(foreign_server([b'data: {"type": "output", "stream": "stdout"}\n\n']))
    with pytest.raises(PadError, match="malformed 'output' frame") as raised:
        await pad.execute("1")
    assert "cannot be asked for the cell again" in str(raised.value)


async def test_scratchpad_only_endpoints_on_another_server_are_a_clear_error() -> None:
    pad = on(foreign_server([]))
    with pytest.raises(PadError, match="does not offer this part of the Scratchpad API"):
        await pad.load_cells()


async def test_a_detached_submit_to_a_server_without_detached_cells_is_a_clear_error() -> None:
    pad = on(foreign_server([]))
    with pytest.raises(PadError, match=r"has no detached cells .*run the cell without detaching"):
        await pad.submit("1")


async def _collect(pad: RemoteRuntime) -> list[object]:
    return [item async for item in pad.execute_streaming("1")]


async def test_a_server_where_nothing_listens_is_a_clear_error_not_a_lost_cell() -> None:
    pad = RemoteRuntime("p", url=f"http://127.0.0.1:{free_port()}", api_key=KEY)
    with pytest.raises(PadError, match="cannot reach the pad server"):
        await pad.execute("1")
    await pad.detach()


async def test_a_cancelled_task_cancels_its_cell_on_the_server(tmp_path: Path) -> None:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _):
        pad = RemoteRuntime("c", url=url, api_key=KEY)
        await pad.start()
        await pad.execute("kept = 1")
        task = asyncio.create_task(pad.execute("import time\nwhile True: time.sleep(0.01)"))
        observer = RemoteRuntime("c", url=url, api_key=KEY)
        while not any(p["status"] == "busy" for p in await observer.server_pads()):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        after = await asyncio.wait_for(observer.execute("kept"), 15)  # the pad is free again
        assert after.result == "1"  # interrupted, not killed
        cells = await observer.load_cells()
        assert cells[-2].status == "cancelled"
        await pad.detach()
        await observer.detach()


async def test_errors_come_back_as_their_own_class(tmp_path: Path) -> None:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _):
        pad = RemoteRuntime("ghost", url=url, api_key=KEY)
        with pytest.raises(PadNotFoundError, match="no pad named 'ghost'"):
            await pad.reset()
        with pytest.raises(InvalidInputError, match="timeout_s must be"):
            await pad.execute("1", timeout_s=-1)
        with pytest.raises(InvalidInputError, match="not allowed"):
            await pad.install_packages(["-r", "requirements.txt"])
        await pad.detach()


async def test_a_request_that_got_no_answer_is_sent_again_with_the_same_id() -> None:
    """A kept-alive connection the server had just closed: nothing came back, so the cell is
    sent once more; its id lets the server recognise it should the first one have arrived."""
    seen: list[dict[str, object]] = []
    cell = json.dumps({"type": "cell", "cell": {"code": "1", "status": "ok", "result": "1"}})

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        if len(seen) == 1:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        body = f"data: {cell}\n\n".encode()
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    pad = on(httpx.AsyncClient(base_url="http://elsewhere", transport=httpx.MockTransport(handle)))
    answer = await pad.execute("1")
    assert answer.result == "1"
    assert len(seen) == 2 and seen[0]["id"] == seen[1]["id"]


async def test_a_stream_cut_after_it_began_is_not_sent_again() -> None:
    seen: list[bytes] = []

    async def body() -> AsyncIterator[bytes]:
        yield b'data: {"type": "progress", "message": "m"}\n\n'
        raise httpx.ReadError("connection reset")

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method != "POST":  # a server of the plain protocol: no cell events
            return httpx.Response(404, json={"detail": "Not Found"})
        seen.append(request.content)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    pad = on(httpx.AsyncClient(base_url="http://elsewhere", transport=httpx.MockTransport(handle)))
    with pytest.raises(PadError, match="went away during this cell"):
        await pad.execute("1")
    assert len(seen) == 1  # it may have run: never twice


async def test_a_connection_cut_mid_cell_is_followed_again_missing_nothing_repeating_nothing(
    tmp_path: Path,
) -> None:
    code = "import time\nfor i in range(40):\n    print(i, flush=True)\n    time.sleep(0.05)\n'end'"
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _):
        relay = Relay(int(url.rsplit(":", 1)[1]))
        try:
            pad = RemoteRuntime("cut", url=relay.url, api_key=KEY)
            await pad.start()
            printed: list[str] = []
            cell = None
            async for item in pad.execute_streaming(code, cell_id="followed"):
                if isinstance(item, OutputEvent):
                    printed.append(item.text)
                    if relay.cuts < 2 and len(printed) in (3, 12):
                        relay.cut()  # twice: the second time while it follows the cell
                elif isinstance(item, Cell):
                    cell = item
            assert relay.cuts == 2
            assert "".join(printed) == "".join(f"{i}\n" for i in range(40))
            assert cell is not None and cell.result == "'end'" and cell.id == "followed"
            assert [c.id for c in await pad.load_cells()] == ["followed"]  # ran once
            await pad.detach()
        finally:
            relay.close()


async def test_a_cell_of_a_killed_server_is_its_record_after_the_restart(
    tmp_path: Path,
) -> None:
    home, port = tmp_path / "home", free_port()
    with running_server(home, tmp_path, KEY, port=port) as (url, process):
        pad = RemoteRuntime("lost", url=url, api_key=KEY, reconnect_s=60.0)
        await pad.start()
        running = asyncio.create_task(pad.execute("import time\ntime.sleep(60)", cell_id="cut"))
        observer = RemoteRuntime("lost", url=url, api_key=KEY)
        while not any(p["status"] == "busy" for p in await observer.server_pads()):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        process.kill()
        process.wait()
    with running_server(home, tmp_path, KEY, port=port):  # back on the same address
        cell = await asyncio.wait_for(running, 60)
    assert cell.id == "cut" and cell.status == "killed"  # the server's record, not ours
    assert "not run again" in (cell.error or "")


async def test_a_cell_the_server_no_longer_knows_is_an_error_not_a_cell() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b'data: {"type": "progress", "message": "m"}\n\n'
        raise httpx.ReadError("connection reset")

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=body()
            )
        return httpx.Response(404, json={"error": "no cell", "type": "PadNotFoundError"})

    pad = on(httpx.AsyncClient(base_url="http://elsewhere", transport=httpx.MockTransport(handle)))
    with pytest.raises(PadError, match="no longer knows the cell"):
        await pad.execute("1")
    assert pad.cells == []


async def test_a_cell_is_found_again_by_id_from_another_client(tmp_path: Path) -> None:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _):
        pad = RemoteRuntime("again", url=url, api_key=KEY)
        await pad.start()
        code = "import time\nfor i in range(5):\n    print(i, flush=True)\n    time.sleep(0.1)\n7"
        handle = await pad.start_cell(code, cell_id="found")
        other = RemoteRuntime("again", url=url, api_key=KEY)
        found = await other.cell("found")
        printed = [f.event.text async for f in found.events() if isinstance(f.event, FeedOutput)]
        assert "".join(printed) == "0\n1\n2\n3\n4\n"
        cell = await found.wait(timeout=30)
        assert cell is not None and cell.result == "7"
        assert (await handle.wait(timeout=30)) == cell
        recorded = await other.cell("found")  # ended: its record
        assert await recorded.peek() == cell
        with pytest.raises(PadNotFoundError):
            await other.cell("never")
        await pad.detach()
        await other.detach()
