"""The web UI's routes answer as the OpenAPI document says (in-process): the pad feed's frames
from real cells, one pad's info (a dead kernel's too), text slices, workspace files with their
headers, a model's pending form, the known engines, and the errors each route documents."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.types import Message

from scratchpad.config import Settings
from scratchpad.events import wire
from scratchpad.padnames import dir_name
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.watch import OVERFLOW
from scratchpad.server.app import create_app
from tests.process_helpers import kernel_pid
from tests.server.test_openapi import AUTH, KEY, RICH_CELL, Checker

WITHIN_S = 60.0
UPLOAD_LIMIT = 64 * 1024
FEED = "/v1/pads/{name}/events"
RUN = "/scratchpad/execute-stream"
WAITING_CELL = (
    "import os, time\nprint('first', flush=True)\nprogress('waiting')\ndisplay('shown')\n"
    "while not os.path.exists('go.flag'):\n    time.sleep(0.01)"
)


@pytest.fixture
async def pads(settings: Settings, workspace: Path) -> AsyncIterator[ScratchpadManager]:
    settings = settings.model_copy(update={"max_upload_bytes": UPLOAD_LIMIT})
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        yield manager


@pytest.fixture
def app(pads: ScratchpadManager) -> FastAPI:
    return create_app(pads, api_key=KEY)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=AUTH) as c:
        yield c


@pytest.fixture
async def checker(client: httpx.AsyncClient) -> Checker:
    return Checker((await client.get("/openapi.json")).json())


class Feed:
    """A feed read from the app in-process, frame by frame (httpx's ASGI transport waits for
    the whole answer, and a feed never ends); leaving it disconnects."""

    def __init__(self, app: FastAPI, path: str) -> None:
        self.app, self.path = app, path
        self.sent: asyncio.Queue[Message] = asyncio.Queue()
        self.gone = asyncio.Event()
        self.buffer = b""
        self.asked = False

    async def __aenter__(self) -> Feed:
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
            "scheme": "http", "path": self.path, "raw_path": self.path.encode(),
            "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
            "server": ("test", 80),
            "headers": [(b"host", b"test"), (b"authorization", f"Bearer {KEY}".encode())],
        }  # fmt: skip
        self.task = asyncio.create_task(self.app(scope, self.receive, self.sent.put))
        async with asyncio.timeout(WITHIN_S):
            start = await self.sent.get()
        assert start["status"] == 200
        self.media = dict(start["headers"])[b"content-type"].decode().split(";")[0]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.gone.set()
        async with asyncio.timeout(WITHIN_S):
            await self.task

    async def receive(self) -> Message:
        if not self.asked:  # an empty GET body, then the client stays until it leaves
            self.asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def next(self, checker: Checker) -> dict[str, Any]:
        """The next frame, validated against the feed's documented frames."""
        async with asyncio.timeout(WITHIN_S):
            while b"\n\n" not in self.buffer:
                self.buffer += (await self.sent.get()).get("body", b"")
        block, self.buffer = self.buffer.split(b"\n\n", 1)
        lines = block.decode().splitlines()
        if lines[0].startswith(":"):  # a ping
            return await self.next(checker)
        assert lines[0].startswith("id: ") and lines[1].startswith("data: "), lines
        frame: dict[str, Any] = json.loads(lines[1][len("data: ") :])
        checker.valid(frame, "GET", FEED, 200, self.media)
        return frame

    async def until(self, checker: Checker, done: Any) -> list[dict[str, Any]]:
        frames = [await self.next(checker)]
        while not done(frames[-1]):
            frames.append(await self.next(checker))
        return frames


async def test_feed_frames_of_real_cells_validate(
    app: FastAPI, client: httpx.AsyncClient, checker: Checker
) -> None:
    async with Feed(app, "/v1/pads/live/events") as feed:
        snapshot = await feed.next(checker)
        assert snapshot["type"] == "snapshot" and snapshot["pad"]["status"] == "new"
        answer = await client.post(RUN, json={"name": "live", "code": RICH_CELL})
        assert answer.status_code == 200
        frames = await feed.until(checker, lambda frame: frame["type"] == "cell")
        cleanup = await client.post("/scratchpad/cleanup", json={"name": "live"})
        assert cleanup.status_code == 200
        removed = await feed.until(checker, lambda f: f["type"] == "status"
                                   and f["pad"]["status"] == "removed")  # fmt: skip
    kinds = {frame["type"] for frame in frames + removed}
    assert kinds == {"status", "queued", "started", "progress", "output", "display", "cell"}
    checker.valid(wire(OVERFLOW), "GET", FEED, 200, "text/event-stream")


async def test_a_snapshot_mid_cell_validates(
    app: FastAPI, client: httpx.AsyncClient, checker: Checker, workspace: Path
) -> None:
    first = asyncio.create_task(client.post(RUN, json={"name": "busy", "code": WAITING_CELL}))
    second: asyncio.Task[httpx.Response] | None = None
    async with asyncio.timeout(WITHIN_S):
        while True:  # reconnect until the snapshot shows the cell waiting and one behind it
            async with Feed(app, "/v1/pads/busy/events") as feed:
                snapshot = await feed.next(checker)
            running = snapshot["running"]
            if running is not None and running["progress"] == "waiting":
                second = second or asyncio.create_task(
                    client.post(RUN, json={"name": "busy", "code": "2", "description": "next"})
                )
                if snapshot["queued"]:
                    break
            await asyncio.sleep(0.05)
    assert running["stdout"] == "first\n" and running["displays"]
    assert snapshot["queued"][0]["description"] == "next" and snapshot["pad"]["status"] == "busy"
    info = checker.answer(await client.get("/v1/pads/busy/info"), "GET", "/v1/pads/{name}/info")
    assert info["running"]["id"] == running["id"] and info["queued"] == 1
    (workspace / "go.flag").touch()
    assert (await first).status_code == 200 and (await second).status_code == 200


async def test_info_of_a_dead_kernel_and_text_slices_validate(
    app: FastAPI, client: httpx.AsyncClient, checker: Checker, pads: ScratchpadManager
) -> None:
    run = await client.post(
        RUN, json={"name": "p", "code": "print('abcdef')\nimport os\nos.getpid()"}
    )
    cell = checker.frames(run, "POST", RUN)[-1]["cell"]
    text = "/v1/pads/{name}/cells/{cell_id}/text"
    url = f"/v1/pads/p/cells/{cell['id']}/text"
    piece = checker.answer(await client.get(url, params={"offset": 2, "length": 3}), "GET", text)
    assert piece["text"] == "cde" and piece["total"] == len("abcdef\n")
    for query, status in [("field=code", 400), ("offset=x", 422), ("offset=-1", 400)]:
        answer = await client.get(f"{url}?{query}")
        assert answer.status_code == status, answer.text
        checker.answer(answer, "GET", text)
    missing = await client.get("/v1/pads/p/cells/nothing/text")
    assert missing.status_code == 404
    checker.answer(missing, "GET", text)
    os.kill(kernel_pid(pads.get("p")), signal.SIGKILL)
    async with asyncio.timeout(WITHIN_S):
        while True:  # the kernel's death is noticed when its process is reaped
            info = (await client.get("/v1/pads/p/info")).json()
            if info["status"] == "dead":
                break
            await asyncio.sleep(0.05)
    assert info["cause"]
    checker.answer(await client.get("/v1/pads/p/info"), "GET", "/v1/pads/{name}/info")
    listed = checker.answer(await client.get("/v1/pads"), "GET", "/v1/pads")
    assert [pad["status"] for pad in listed["pads"]] == ["dead"]
    for url, status in [("/v1/pads/nobody/info", 404), ("/v1/pads/bad%0Aname/info", 400)]:
        answer = await client.get(url)
        assert answer.status_code == status, answer.text
        checker.answer(answer, "GET", "/v1/pads/{name}/info")


async def test_file_answers_validate(
    pads: ScratchpadManager, client: httpx.AsyncClient, checker: Checker
) -> None:
    (pads.settings.home / "pads" / dir_name("f")).mkdir(parents=True)  # a pad on disk
    one, listing = "/v1/pads/{name}/files/{path}", "/v1/pads/{name}/files"
    for expected in (201, 200):  # created, then replaced
        answer = await client.put("/v1/pads/f/files/data/a.txt", content=b"hello")
        assert answer.status_code == expected, answer.text
        checker.answer(answer, "PUT", one)
    await client.put("/v1/pads/f/files/data/blob.bin", content=bytes(range(256)))
    top = checker.answer(await client.get("/v1/pads/f/files"), "GET", listing)
    assert [entry["type"] for entry in top["entries"]] == ["dir"]
    inner = await client.get("/v1/pads/f/files", params={"path": "data"})
    assert len(checker.answer(inner, "GET", listing)["entries"]) == 2
    for url in ("/v1/pads/f/files/data/a.txt", "/v1/pads/f/files/data/blob.bin?download=1"):
        checker.download(await client.get(url), "GET", one)
    deleted = await client.delete("/v1/pads/f/files/data/blob.bin")
    assert checker.answer(deleted, "DELETE", one) == {"deleted": "data/blob.bin"}
    too_big = b"x" * (UPLOAD_LIMIT + 1)
    for method, url, body, status in [
        ("GET", "/v1/pads/f/files/data", None, 409),
        ("GET", "/v1/pads/f/files/nothing.txt", None, 404),
        ("GET", "/v1/pads/f/files/a%01b", None, 400),
        ("GET", "/v1/pads/f/files/data/a.txt?download=maybe", None, 422),
        ("PUT", "/v1/pads/f/files/data", b"x", 409),
        ("PUT", "/v1/pads/f/files/big.bin", too_big, 413),  # refused by its length
        ("PUT", "/v1/pads/f/files/big.bin", _chunks(too_big), 413),  # cut off while written
        ("DELETE", "/v1/pads/f/files/data", None, 409),
        ("DELETE", "/v1/pads/nobody/files/x", None, 404),
    ]:
        answer = await client.request(method, url, content=body)
        assert answer.status_code == status, (method, url, answer.text)
        checker.answer(answer, method, one)
    for params, status in [({"path": "data/a.txt"}, 409), ({"path": "/etc"}, 400)]:
        answer = await client.get("/v1/pads/f/files", params=params)
        assert answer.status_code == status, answer.text
        checker.answer(answer, "GET", listing)


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    for at in range(0, len(data), 4096):
        yield data[at : at + 4096]


async def test_forms_and_engines_validate(
    app: FastAPI, client: httpx.AsyncClient, checker: Checker
) -> None:
    spec = {
        "engine": "svc",
        "title": "Connect",
        "logo": "cloud",
        "fields": [{"name": "region", "type": "select", "options": ["eu", "us"], "default": "eu"}],
        "methods": [
            {"id": "token", "recommended": True, "fields": [{"name": "token", "type": "password"}]},
            {"id": "basic", "fields": [{"name": "user"}, {"name": "password", "type": "password"}]},
        ],
        "actions": [{"id": "go", "label": "Go", "kind": "primary"}],
    }
    form = app.state.forms.open(spec)
    waiting = checker.answer(await client.get("/v1/forms"), "GET", "/v1/forms")["forms"]
    assert [(f["form_id"], f["title"], f["engine"]) for f in waiting] == [
        (form.form_id, "Connect", "svc")
    ]
    assert waiting[0]["created_at"] < waiting[0]["expires_at"]
    path = "/v1/forms/{form_id}"
    opened = checker.answer(await client.get(f"/v1/forms/{form.form_id}"), "GET", path)
    assert opened["status"] == "open" and opened["spec"]["methods"][0]["id"] == "token"
    names = {"engine": "svc", "name": "1", "variables": ["DS_SVC_1__TOKEN"]}
    app.state.forms.complete(form.form_id, names)
    done = checker.answer(await client.get(f"/v1/forms/{form.form_id}"), "GET", path)
    assert done["connection"] == names
    assert (await client.get("/v1/forms")).json() == {"forms": []}  # completed: no longer waits
    missing = await client.get("/v1/forms/fm_nothing")
    assert missing.status_code == 404
    checker.answer(missing, "GET", path)
    engines = await client.get("/v1/datasources/engines")
    assert checker.answer(engines, "GET", "/v1/datasources/engines")["engines"]


async def test_login_links_logout_and_browser_refusals_validate(
    app: FastAPI, checker: Checker
) -> None:
    links, base = "/v1/login-links", "http://127.0.0.1"
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=base) as browser:
        made = await browser.post(links, headers=AUTH, json={"scope": "form:f1"})
        assert checker.answer(made, "POST", links)["url"].startswith(f"{base}/login?token=")
        assert made.headers["cache-control"] == "no-store"
        for body, status in [({"next": "//elsewhere"}, 400), ({"scope": "x"}, 400),
                             ({"more": 1}, 422)]:  # fmt: skip
            answer = await browser.post(links, headers=AUTH, json=body)
            assert answer.status_code == status, answer.text
            checker.answer(answer, "POST", links)
        token = {"token": made.json()["url"].split("=")[-1]}
        login = checker.answer(await browser.post("/login", json=token), "POST", "/login")
        assert login["scope"] == "form:f1"  # a session of form f1 only
        spent = await browser.post("/login", json=token)
        assert spent.status_code == 401 and checker.answer(spent, "POST", "/login")
        browser.headers["x-scratchpad-session"] = login["session"]
        for method, url, path in [("GET", "/v1/pads", "/v1/pads"), ("POST", links, links),
                                  ("POST", "/logout", "/logout"),
                                  ("POST", "/v1/signed-urls", "/v1/signed-urls")]:  # fmt: skip
            refused = await browser.request(method, url, json={"url": "/v1/pads/p/dump"})
            assert refused.status_code == 403, (url, refused.text)  # outside its form; no Origin
            checker.answer(refused, method, path)
        out = await browser.post("/logout", headers={"Origin": base})
        assert checker.answer(out, "POST", "/logout") == {"ok": True}
        full = await browser.post(links, headers=AUTH, json={})
        login = checker.answer(
            await browser.post("/login", json={"token": full.json()["url"].split("=")[-1]}),
            "POST",
            "/login",
        )
        own = {"x-scratchpad-session": login["session"], "Origin": base}
        signs = "/v1/signed-urls"
        signed = await browser.post(signs, headers=own, json={"url": "/v1/pads/p/notebook"})
        assert checker.answer(signed, "POST", signs)["url"].startswith("/v1/pads/p/notebook?sig=")
        refused = await browser.post(signs, headers=own, json={"url": "/v1/pads"})
        assert refused.status_code == 400 and checker.answer(refused, "POST", signs)
