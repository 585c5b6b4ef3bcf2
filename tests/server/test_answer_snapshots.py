"""The bytes of the server's plain JSON answers, pinned: the protocol's small answers, the
server's identity, the pad list, a pad's cells and its exports, text slices, the vault
(connections, grants, audit), the forms a model asked for, credential submissions, browser
sessions and workspace files, each compared with ``snapshots/answers_*.txt``. A change here
changes what clients written elsewhere read: it must be deliberate (rewrite them with
``WRITE_WIRE_SNAPSHOTS=1`` and say why in the commit).

Values that change from run to run (times, tokens, signatures, ids, pids) are fixed by the
test or replaced by a placeholder before the bytes are compared; everything else is as it went
out."""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import TypeAdapter

from scratchpad import events
from scratchpad.config import Settings
from scratchpad.errors import InstallError
from scratchpad.runtime import confinement, render
from scratchpad.runtime.cell import Cell
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.padinfo import PadInfo
from scratchpad.server.app import create_app
from scratchpad.server.datavault_routes import datavault_routes
from scratchpad.vault import Vault, audit
from scratchpad.wire import wire
from tests.server.test_wire_snapshots import ITEMS, check, recorded

KEY = "test-key"
BASE = "http://127.0.0.1:8123"
STAMP = "2025-01-31T12:00:00+00:00"
MTIME = 1_700_000_000
RANDOM = (  # what differs from run to run, as (pattern, placeholder)
    (re.compile(r'"(session|token)":"[^"]+"'), r'"\1":"<\1>"'),
    (re.compile(r"token=[A-Za-z0-9_-]+"), "token=<token>"),
    (re.compile(r"sig=[A-Za-z0-9_.-]+"), "sig=<sig>"),
    (re.compile(r'"expires_at":[0-9.e+]+'), '"expires_at":<time>'),
    (re.compile(r'"created_at":[0-9.e+]+'), '"created_at":<time>'),
    (re.compile(r"fm_[0-9a-f]+"), "<form>"),
    (re.compile(r"sub_[0-9a-f]+"), "<submission>"),
)


class StubPad:
    """A pad with recorded cells, as ``manager.peek`` gives one."""

    def __init__(self, name: str, cells: list[Cell]) -> None:
        self.name = name
        self.cells = cells
        self.reset_calls = 0

    async def load_cells(self) -> list[Cell]:
        return self.cells

    def dump(self) -> str:
        return render.dump(self.name, self.cells)

    def to_ipynb(self) -> dict[str, Any]:
        return render.to_ipynb(self.name, self.cells)

    async def configure_llm(self, llm: object) -> None:
        return None

    async def reset(self) -> None:
        self.reset_calls += 1

    async def install_packages(self, packages: list[str]) -> str:
        if packages == ["broken"]:
            raise InstallError("no such package: broken", exit_code=1)
        return f"Installed {', '.join(packages)}"


PADS = [
    PadInfo("idle pad", "idle", 2, 0, None, None, 123_456, 1_700_000_000.25),
    PadInfo("busy/ü", "busy", 5, 1, 1_700_000_001.5, {"id": "c-9", "description": "fit"}, 7),
    PadInfo("stopped", "stopped", 3, 0, None, None, None, 1_699_999_999.0),
    PadInfo("dead", "dead", 1, 0, None, {"id": "c-2", "description": ""}, cause="killed (OOM)"),
]
REPORTS = [
    {
        "sandbox": "landlock",
        "sandbox_abi": 4,
        "confinement": {
            "landlock": "ABI 4",
            "namespaces": "user, mount, PID and IPC namespaces per kernel",
            "home": "hidden",
            "identity": "the server's user",
            "devices": "a private /dev",
            "processes": "a PID namespace per kernel",
            "limits": {"memory": "none", "processes": "256", "cpu": "100", "disk": "none"},
        },
    },
    {
        "sandbox": "off",
        "confinement": {
            "landlock": "off",
            "namespaces": "off (SCRATCHPAD_SANDBOX=off)",
            "home": "readable",
            "identity": "the server's user",
            "devices": "every device",
            "processes": "the kernel's process group",
            "limits": {},
        },
    },
]


@pytest.fixture
async def served(
    workspace: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[httpx.AsyncClient, ScratchpadManager]]:
    monkeypatch.setattr(audit, "now", lambda: STAMP)
    monkeypatch.setattr("scratchpad.vault.records.now", lambda: STAMP)
    vault = Vault(settings.with_home(workspace / ".scratchpad"), keyring=None)
    manager = ScratchpadManager(workspace=workspace, settings=settings, vault=vault)
    app = create_app(manager, api_key=KEY, origin=BASE)
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {KEY}", "Host": BASE.removeprefix("http://")}
    async with httpx.AsyncClient(transport=transport, base_url=BASE, headers=headers) as client:
        client.app = app  # type: ignore[attr-defined]
        yield client, manager
    await manager.close_all()


class Pinned:
    """The answers of one test, one request a block: the request, the status, the body."""

    def __init__(self, client: httpx.AsyncClient, where: Path | None = None) -> None:
        self.client = client
        self.where = str(where) if where is not None else None  # a directory of this run
        self.lines: list[str] = []

    async def __call__(
        self, method: str, path: str, *, keyless: bool = False, **options: Any
    ) -> httpx.Response:
        """``keyless``: without the API key (a browser's request)."""
        request = self.client.build_request(method, path, **options)
        if keyless:
            del request.headers["authorization"]
        answer = await self.client.send(request)
        head, body = f"{method} {path} {answer.status_code}", answer.content.decode()
        for pattern, placeholder in RANDOM:
            head, body = pattern.sub(placeholder, head), pattern.sub(placeholder, body)
        if self.where is not None:
            body = body.replace(self.where, "<tmp>")
        self.lines += [head, json.dumps(body), ""]
        return answer

    def text(self) -> str:
        return "\n".join(self.lines)


async def test_protocol_server_and_pad_answers_keep_their_bytes(
    served: tuple[httpx.AsyncClient, ScratchpadManager], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, manager = served
    pad = StubPad("wire pad/ü", [recorded(1), recorded(2, status="error", error="E\x01 ü")])
    exists = {"wire pad/ü": True}

    async def get_or_create(name: str, **options: Any) -> StubPad:
        return pad

    async def cancel(name: str, cell_id: str | None = None) -> bool:
        return cell_id == "c-1"

    async def list_pads() -> list[PadInfo]:
        return PADS

    async def closed(name: str) -> None:
        return None

    monkeypatch.setattr(manager, "get_or_create", get_or_create)
    monkeypatch.setattr(manager, "exists", lambda name: exists.get(name, False))
    monkeypatch.setattr(manager, "cancel", cancel)
    monkeypatch.setattr(manager, "close", closed)
    monkeypatch.setattr(manager, "remove", closed)
    monkeypatch.setattr(manager, "list_pads", list_pads)
    monkeypatch.setattr(manager, "names", lambda: ["busy/ü", "idle pad"])
    monkeypatch.setattr(manager, "peek", lambda name: pad)
    monkeypatch.setattr(os, "getpid", lambda: 4242)
    pin = Pinned(client)
    await pin("POST", "/scratchpad/start", json={"name": "wire pad/ü"})
    await pin("POST", "/scratchpad/reset", json={"name": "wire pad/ü"})
    await pin("POST", "/scratchpad/reset", json={"name": "gone"})
    await pin("POST", "/scratchpad/close", json={"name": "wire pad/ü"})
    await pin("POST", "/scratchpad/cancel", json={"name": "wire pad/ü", "id": "c-1"})
    await pin("POST", "/scratchpad/cancel", json={"name": "wire pad/ü"})
    await pin("POST", "/scratchpad/cleanup", json={"name": "wire pad/ü"})
    await pin("POST", "/scratchpad/cleanup", json={"name": "gone"})
    for packages in ([], ["-r requirements.txt"], ["six", "ü"], ["broken"]):
        await pin("POST", "/scratchpad/install", json={"name": "p", "packages": packages})
    await pin("GET", "/healthz")
    for report in REPORTS:
        monkeypatch.setattr(confinement, "report", lambda settings, report=report: report)
        await pin("GET", "/v1/server")
    await pin("GET", "/v1/pads")
    await pin("GET", "/v1/pads/wire%20pad%2F%C3%BC")
    await pin("GET", "/v1/pads/p/cells/cell-2")
    await pin("GET", "/v1/pads/p/notebook")
    await pin("GET", "/v1/pads/p/dump")
    for field, offset, length in (("stdout", 0, 65536), ("error", 1, 2), ("result", 5, 1)):
        params = {"field": field, "offset": offset, "length": length}
        await pin("GET", "/v1/pads/p/cells/cell-2/text", params=params)
    check("answers_pads.txt", pin.text())


async def test_vault_answers_keep_their_bytes(
    served: tuple[httpx.AsyncClient, ScratchpadManager], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, manager = served
    monkeypatch.setattr(manager, "names", lambda: ["main", "p/q"])
    pin = Pinned(client, manager.vault.directory)
    fields = {"host": "db ü", "port": 5432, "password": "s3cret-ü"}
    postgres = {"engine": "postgres", "fields": fields}
    await pin("POST", "/v1/datasources", json=postgres)
    await pin("POST", "/v1/datasources", json={**postgres, "name": "prod", "secure_keys": []})
    directory = manager.vault.directory
    (directory / "broken+bad.fernet").write_bytes(b"not a record")
    await pin("GET", "/v1/datasources")
    await pin("GET", "/v1/datasources/postgres/1")
    await pin("POST", "/v1/datasources/validate", json={"engine": "postgres", "fields": {}})
    await pin("POST", "/v1/datasources/validate", json={**postgres, "name": "other"})
    await pin("POST", "/v1/datasources/validate", json={"engine": 5, "name": None})
    await pin("GET", "/v1/pads/p%2Fq/grants")
    await pin("PUT", "/v1/pads/p%2Fq/grants", json={"engine": "postgres", "name": "1"})
    await pin("POST", "/v1/pads/main/grants", json={"engine": "postgres", "name": "prod"})
    await pin("DELETE", "/v1/pads/main/grants/postgres/prod")
    await pin("GET", "/v1/grants")
    await pin("DELETE", "/v1/datasources/postgres/prod")
    await pin("GET", "/v1/vault/audit", params={"limit": 4})
    await pin("GET", "/v1/vault/audit", params={"limit": 0})
    await pin("GET", "/v1/vault/description")
    await pin("GET", "/v1/datasources/engines")
    check("answers_vault.txt", pin.text())


async def test_form_session_and_file_answers_keep_their_bytes(
    served: tuple[httpx.AsyncClient, ScratchpadManager], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, manager = served
    monkeypatch.setattr(manager, "exists", lambda name: True)  # no kernel for an upload
    forms = client.app.state.forms  # type: ignore[attr-defined]
    spec = {
        "engine": "postgres",
        "title": "Connect ü",
        "fields": [
            {"name": "host", "label": "Host", "type": "text", "required": True},
            {"name": "password", "label": "Password", "type": "password", "required": True},
        ],
    }
    first = forms.open(spec)
    second = forms.open({**spec, "form_id": "named-form", "title": "Second"})
    forms.complete(second.form_id, {"engine": "postgres", "name": "1", "variables": ["DS_X"]})
    pin = Pinned(client)
    await pin("GET", "/v1/forms")
    await pin("GET", f"/v1/forms/{first.form_id}")
    await pin("GET", "/v1/forms/named-form")
    link = await pin("POST", "/v1/login-links", json={"next": "/connect/x", "scope": "all"})
    token = link.json()["url"].rsplit("token=", 1)[1]
    login = await pin("POST", "/login", json={"token": token}, keyless=True)
    session = {"X-Scratchpad-Session": login.json()["session"], "Origin": BASE}
    for url in ("/v1/pads/main/dump", "/v1/pads/main/notebook?x=1&y=%C3%BC"):
        await pin("POST", "/v1/signed-urls", json={"url": url}, headers=session, keyless=True)
    await pin("POST", "/v1/login-links", headers=session, keyless=True)
    await pin("POST", "/logout", headers=session, keyless=True)
    await pin("PUT", "/v1/pads/main/files/data/ü.txt", content=b"hello")
    await pin("PUT", "/v1/pads/main/files/data/ü.txt", content=b"hello again")
    await pin("PUT", "/v1/pads/main/files/top.csv", content=b"a,b\n")
    root = manager.workspace_of("main")
    for path in (root / "data", root / "data" / "ü.txt", root / "top.csv"):
        os.utime(path, (MTIME, MTIME))
    await pin("GET", "/v1/pads/main/files")
    await pin("GET", "/v1/pads/main/files", params={"path": "data"})
    await pin("DELETE", "/v1/pads/main/files/data/ü.txt")
    check("answers_forms_files.txt", pin.text())


async def test_a_submissions_answer_keeps_its_bytes(manager: ScratchpadManager) -> None:
    app = FastAPI()
    submissions = datavault_routes(app, manager)
    spec = {
        "engine": "postgres",
        "title": "Connect",
        "fields": [
            {"name": "host", "label": "Host", "type": "text", "required": True},
            {"name": "password", "label": "Password", "type": "password", "required": False},
        ],
    }
    staged = submissions.stage(spec, {"host": "db ü", "password": "s3cret-x"}, form_id="f-1")
    ended = submissions.stage(
        spec, {"host": "h"}, ["password"], conversation_id="c-1", connection_name="prod"
    )
    ended.status = "failed"
    ended.outcome = {"status": "failed", "reason": "no route to host ü", "fields": ["host"]}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        pin = Pinned(client)
        for submission in (staged, ended):
            await pin("GET", f"/v1/datavault/submissions/{submission.id}")
    check("answers_submissions.txt", pin.text())


async def test_detached_cell_answers_and_frames_keep_their_bytes(
    served: tuple[httpx.AsyncClient, ScratchpadManager], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pad's cells as they stand (queued, running, recorded, read back from the history),
    their list, and their journals' numbered frames (a whole replay, a resume, a resync)."""
    client, manager = served
    monkeypatch.setattr(manager, "peek", lambda name: StubPad(name, [recorded(1)]))
    watch = manager.watch("d")
    for cell_id, limit in (("done", None), ("trimmed", 2)):
        cell = recorded(2, id=cell_id)
        watch.queued(cell)
        if limit is not None:  # its ring holds two frames: a reader from 0 gets a resync
            journal = watch.journals.get(cell_id)
            assert journal is not None
            journal.max_frames = limit
        watch.started(cell)
        watch.seen([*ITEMS, cell])
        watch.recorded(cell)
    running = recorded(3, id="r-1")
    watch.queued(running)
    watch.started(running)
    watch.seen(ITEMS)
    watch.queued(recorded(4, id="q-1"))
    pin = Pinned(client)
    typed: list[tuple[Any, httpx.Response]] = [
        (events.CellList, await pin("GET", "/v1/pads/d/cells"))
    ]
    typed += [(events.CellList, await pin("GET", "/v1/pads/d/cells?status=recent"))]
    for cell_id in ("q-1", "r-1", "done", "cell-1"):
        typed += [(events.CellStanding, await pin("GET", f"/v1/pads/d/cells/{cell_id}"))]
    await pin("GET", "/v1/pads/d/cells/nope")
    typed += [(events.CellStanding, await pin("POST", "/v1/pads/d/cells/r-1/wait?timeout=0"))]
    streams = [await pin("GET", "/v1/pads/d/cells/done/events")]
    streams += [
        await pin("GET", "/v1/pads/d/cells/done/events", headers={"Last-Event-ID": "done:5"})
    ]
    streams += [await pin("GET", "/v1/pads/d/cells/trimmed/events")]
    streams += [await pin("GET", "/v1/pads/d/cells/cell-1/events")]
    await pin("GET", "/v1/pads/d/cells/done/events", headers={"Last-Event-ID": "other:1"})
    await pin("POST", "/v1/pads/d/cells", json={"code": "1", "id": "bad id!"})
    await pin("POST", "/v1/pads/d/cells", json={"code": "1", "unknown": True})
    text = re.sub(r'\\"(started|ended)_at\\": ?[0-9.e+]+', r'\\"\1_at\\":<time>', pin.text())
    check("answers_cells.txt", text)
    for union, answer in typed:  # each answer is its model, and goes out as it is
        data = answer.json()
        assert wire(TypeAdapter(union).validate_python(data)) == data
    frames = [
        json.loads(line.removeprefix("data: "))
        for answer in streams
        for line in answer.text.split("\n")
        if line.startswith("data: ")
    ]
    assert {frame["type"] for frame in frames} == {
        "queued", "started", "progress", "output", "display", "cell", "resync",
    }  # fmt: skip
    for data in frames:
        assert wire(TypeAdapter(events.JournalFrame).validate_python(data)) == data
