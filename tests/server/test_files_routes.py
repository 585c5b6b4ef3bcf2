"""Workspace files over HTTP (in-process): list, download with headers that keep files from
running as pages, uploads streamed under their own limit, deletes, and refusals."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.types import Message

from scratchpad.config import Settings
from scratchpad.padnames import dir_name
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.app import create_app

KEY = "test-key"
CSP = "sandbox; default-src 'none'"


@pytest.fixture
async def files_client(
    workspace: Path, settings: Settings
) -> AsyncIterator[tuple[httpx.AsyncClient, ScratchpadManager]]:
    small = settings.model_copy(update={"max_request_bytes": 2048, "max_upload_bytes": 8192})
    manager = ScratchpadManager(workspace=workspace, settings=small)
    for name in ("main", "data/team"):  # pads on disk, not running
        (manager.settings.home / "pads" / dir_name(name)).mkdir(parents=True)
    app = create_app(manager, api_key=KEY)
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        yield c, manager
    await manager.close_all()


@pytest.fixture
def client(files_client: tuple[httpx.AsyncClient, ScratchpadManager]) -> httpx.AsyncClient:
    return files_client[0]


async def test_listing_hides_the_home(client: httpx.AsyncClient, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "a.txt").write_text("abc")
    answer = await client.get("/v1/pads/main/files")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["pad"] == "main" and body["path"] == "" and body["truncated"] is False
    assert [(e["name"], e["type"], e["size"]) for e in body["entries"]] == [
        ("sub", "dir", None),
        ("a.txt", "file", 3),
    ]
    inner = await client.get("/v1/pads/main/files", params={"path": "sub"})
    assert inner.json() == {"pad": "main", "path": "sub", "entries": [], "truncated": False}


@pytest.mark.parametrize(
    ("name", "kind", "media"),
    [
        ("page.html", "attachment", "text/html; charset=utf-8"),
        ("draw.svg", "attachment", "image/svg+xml"),
        ("app.js", "attachment", None),
        ("plot.png", "inline", "image/png"),
        ("notes.txt", "inline", "text/plain; charset=utf-8"),
        ("blob", "attachment", "application/octet-stream"),
    ],
)
async def test_downloads_never_run_as_pages(
    client: httpx.AsyncClient, workspace: Path, name: str, kind: str, media: str | None
) -> None:
    (workspace / name).write_bytes(b"<script>alert(1)</script>")
    answer = await client.get(f"/v1/pads/main/files/{name}")
    assert answer.status_code == 200, answer.text
    assert answer.content == b"<script>alert(1)</script>"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["content-security-policy"] == CSP
    assert answer.headers["content-disposition"].startswith(f'{kind}; filename="{name}"')
    if media is not None:
        assert answer.headers["content-type"] == media
    forced = await client.get(f"/v1/pads/main/files/{name}", params={"download": "1"})
    assert forced.headers["content-disposition"].startswith("attachment;")


async def test_put_then_get_round_trip(client: httpx.AsyncClient, workspace: Path) -> None:
    url = "/v1/pads/main/files/new%20dir/d%C3%A9j%C3%A0%20vu.bin"
    data = bytes(range(256)) * 16  # 4 KiB: over the request limit, under the upload limit
    created = await client.put(url, content=data)
    assert created.status_code == 201, created.text
    assert created.json() == {"path": "new dir/déjà vu.bin", "size": len(data)}
    assert (workspace / "new dir" / "déjà vu.bin").read_bytes() == data
    replaced = await client.put(url, content=b"second")
    assert replaced.status_code == 200 and replaced.json()["size"] == 6
    got = await client.get(url)
    assert got.content == b"second"
    assert "filename*=UTF-8''d%C3%A9j%C3%A0%20vu.bin" in got.headers["content-disposition"]


async def _chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def test_uploads_over_the_limit_are_refused(
    client: httpx.AsyncClient, workspace: Path
) -> None:
    url = "/v1/pads/main/files/big.bin"
    declared = await client.put(url, content=b"x" * 9000)
    assert declared.status_code == 413 and declared.json()["type"] == "InvalidInputError"
    streamed = await client.put(url, content=_chunks(b"x" * 9000, 1000))  # chunked
    assert streamed.status_code == 413, streamed.text
    assert streamed.json()["type"] == "FileTooLargeError"
    assert "SCRATCHPAD_MAX_UPLOAD_BYTES" in streamed.json()["error"]
    assert sorted(p.name for p in workspace.iterdir()) == [".scratchpad"]
    other = await client.post("/scratchpad/start", content=b"x" * 4000)  # others keep theirs
    assert other.status_code == 413


async def test_put_never_replaces_a_directory(client: httpx.AsyncClient, workspace: Path) -> None:
    (workspace / "d").mkdir()
    answer = await client.put("/v1/pads/main/files/d", content=b"x")
    assert answer.status_code == 409 and answer.json()["type"] == "WorkspaceConflictError"
    assert (workspace / "d").is_dir()


async def test_delete(client: httpx.AsyncClient, workspace: Path) -> None:
    (workspace / "full").mkdir()
    (workspace / "full" / "f.txt").write_text("x")
    deleted = await client.delete("/v1/pads/main/files/full/f.txt")
    assert deleted.json() == {"deleted": "full/f.txt"}
    assert not (workspace / "full" / "f.txt").exists()
    again = await client.delete("/v1/pads/main/files/full/f.txt")
    assert again.status_code == 404 and again.json()["type"] == "WorkspaceFileNotFoundError"
    (workspace / "full" / "g").write_text("x")
    busy = await client.delete("/v1/pads/main/files/full")
    assert busy.status_code == 409 and "not empty" in busy.json()["error"]


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("GET", "/v1/pads/main/files/%2e%2e/outside.txt"),
        ("GET", "/v1/pads/main/files//etc/passwd"),
        ("GET", "/v1/pads/main/files/.scratchpad/secret.txt"),
        ("GET", "/v1/pads/main/files?path=../"),
        ("GET", "/v1/pads/main/files/a%00b"),
        ("PUT", "/v1/pads/main/files/%2e%2e/outside.txt"),
        ("PUT", "/v1/pads/main/files/.scratchpad/secret.txt"),
        ("DELETE", "/v1/pads/main/files/.scratchpad/secret.txt"),
    ],
)
async def test_paths_out_of_bounds_answer_400(
    client: httpx.AsyncClient, workspace: Path, method: str, url: str
) -> None:
    (workspace.parent / "outside.txt").write_text("OUTSIDE-CONTENT")
    (workspace / ".scratchpad" / "secret.txt").write_text("HOME-CONTENT")
    answer = await client.request(method, url, content=b"x" if method == "PUT" else None)
    assert answer.status_code == 400, answer.text
    assert answer.json()["type"] == "InvalidInputError"
    assert "CONTENT" not in answer.text
    assert (workspace.parent / "outside.txt").read_text() == "OUTSIDE-CONTENT"
    assert (workspace / ".scratchpad" / "secret.txt").read_text() == "HOME-CONTENT"


async def test_pad_names_with_a_slash(client: httpx.AsyncClient, workspace: Path) -> None:
    put = await client.put("/v1/pads/data%2Fteam/files/x.txt", content=b"hi")
    assert put.status_code == 201, put.text
    listed = await client.get("/v1/pads/data%2Fteam/files")
    assert listed.json()["pad"] == "data/team"
    assert (await client.get("/v1/pads/data%2Fteam/files/x.txt")).content == b"hi"


async def test_unknown_pads_answer_404(client: httpx.AsyncClient, workspace: Path) -> None:
    for method in ("GET", "DELETE"):  # a PUT makes the pad (tests/server/test_downloads.py)
        answer = await client.request(method, "/v1/pads/nobody/files/x.txt")
        assert answer.status_code == 404 and answer.json()["type"] == "PadNotFoundError"
    assert (await client.head("/v1/pads/nobody/files/x.txt")).status_code == 404
    assert not (workspace / "x.txt").exists()


async def test_the_key_is_required(client: httpx.AsyncClient, workspace: Path) -> None:
    (workspace / "a.txt").write_text("private")
    bare = {"Authorization": ""}
    for method, url in [
        ("GET", "/v1/pads/main/files"),
        ("GET", "/v1/pads/main/files/a.txt"),
        ("PUT", "/v1/pads/main/files/b.txt"),
        ("DELETE", "/v1/pads/main/files/a.txt"),
    ]:
        answer = await client.request(method, url, headers=bare, content=b"x")
        assert answer.status_code == 401 and "private" not in answer.text
    assert (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()


async def test_a_cells_file_is_listed_and_served(
    files_client: tuple[httpx.AsyncClient, ScratchpadManager], scratch: Path
) -> None:
    """A real kernel writes into its working directory (``scratch/``: where the sandbox lets
    it when the home is in the workspace); the same file comes back over HTTP."""
    client, manager = files_client
    pad = await manager.get_or_create("main")
    cell = await pad.execute("open('scratch/from_cell.txt', 'w').write('made by a cell')")
    assert cell.status == "ok", cell.error
    listed = await client.get("/v1/pads/main/files", params={"path": "scratch"})
    assert [e["name"] for e in listed.json()["entries"]] == ["from_cell.txt"]
    got = await client.get("/v1/pads/main/files/scratch/from_cell.txt")
    assert got.text == "made by a cell"


async def test_an_upload_cut_off_leaves_nothing(
    files_client: tuple[httpx.AsyncClient, ScratchpadManager], workspace: Path
) -> None:
    """The client goes away mid-body: no file, no temp file, an answer nobody reads."""
    client, _ = files_client
    transport = client._transport
    assert isinstance(transport, httpx.ASGITransport)
    messages: list[Message] = [
        {"type": "http.request", "body": b"partial", "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        return messages.pop(0)

    async def send(message: Message) -> None:
        sent.append(message)

    path = "/v1/pads/main/files/cut.bin"
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "PUT",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "server": ("t", 80), "client": ("127.0.0.1", 1),
        "headers": [(b"authorization", f"Bearer {KEY}".encode()), (b"content-length", b"100")],
    }  # fmt: skip
    await transport.app(scope, receive, send)
    assert sent[0]["status"] == 400
    assert sorted(p.name for p in workspace.iterdir()) == [".scratchpad"]
