"""The HTTP app in-process (httpx ASGITransport): protocol, read endpoints, auth, bad input."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest
from starlette.types import Message

from scratchpad.config import Settings
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.app import create_app
from scratchpad.server.auth import key_path, resolve_api_key

KEY = "test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
JSON = {"content-type": "application/json"}


@pytest.fixture
async def client(manager: ScratchpadManager) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(manager, api_key=KEY)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=AUTH) as http:
        yield http


def frames(text: str) -> list[dict[str, Any]]:
    """Parse an SSE body: ``data: <json>`` frames separated by blank lines."""
    blocks = [b for b in text.replace("\r\n", "\n").split("\n\n") if b.strip()]
    return [json.loads(b.removeprefix("data: ")) for b in blocks if b.startswith("data: ")]


async def test_execute_stream_keeps_state_and_ends_with_one_cell(client: httpx.AsyncClient) -> None:
    first = await client.post("/scratchpad/execute-stream", json={"name": "p", "code": "x = 41"})
    assert first.status_code == 200
    assert first.headers["content-type"].startswith("text/event-stream")
    assert frames(first.text)[-1]["cell"]["status"] == "ok"
    second = await client.post(
        "/scratchpad/execute-stream",
        json={
            "name": "p",
            "code": "progress('half')\nx + 1",
            "description": "add",
            "estimated_time": "1s",
            "estimated_seconds": 1,
        },
    )
    parsed = frames(second.text)
    assert parsed[0] == {"type": "progress", "message": "half"}
    assert [f["type"] for f in parsed] == ["progress", "cell"]
    cell = parsed[-1]["cell"]
    assert (cell["result"], cell["description"], cell["estimated_time"]) == ("42", "add", "1s")


async def test_output_and_display_frames_only_for_clients_that_ask(
    client: httpx.AsyncClient,
) -> None:
    code = "print('hi')\ndisplay('shown')\nprogress('p')"
    plain = await client.post("/scratchpad/execute-stream", json={"name": "p", "code": code})
    assert [f["type"] for f in frames(plain.text)] == ["progress", "cell"]
    asked = await client.post(
        "/scratchpad/execute-stream", json={"name": "p", "code": code, "stream_output": True}
    )
    parsed = frames(asked.text)
    assert parsed[:3] == [
        {"type": "output", "stream": "stdout", "text": "hi\n"},
        {"type": "display", "data": {"text/plain": "'shown'"}},
        {"type": "progress", "message": "p"},
    ]
    assert parsed[3]["cell"]["stdout"] == "hi\n" and len(parsed) == 4


async def test_lifecycle_routes(client: httpx.AsyncClient, manager: ScratchpadManager) -> None:
    assert (await client.post("/scratchpad/start", json={"name": "life"})).json() == {"ok": True}
    assert manager.names() == ["life"]
    await client.post("/scratchpad/execute-stream", json={"name": "life", "code": "v = 1"})
    reset = await client.post("/scratchpad/reset", json={"name": "life"})
    assert reset.json() == {"ok": True, "reset": True}
    after = await client.post("/scratchpad/execute-stream", json={"name": "life", "code": "v"})
    assert "NameError" in frames(after.text)[-1]["cell"]["error"]
    cancelled = await client.post("/scratchpad/cancel", json={"name": "life"})
    assert cancelled.json() == {"ok": True, "cancelled": False}  # nothing was running
    assert (await client.post("/scratchpad/close", json={"name": "life"})).json() == {"ok": True}
    assert manager.names() == []
    assert (await client.post("/scratchpad/cleanup", json={"name": "life"})).json() == {"ok": True}
    assert manager.names_on_disk() == []


async def test_install_answers_with_the_installer_output(
    client: httpx.AsyncClient, wheel: Any
) -> None:
    answer = await client.post(
        "/scratchpad/install", json={"name": "inst", "packages": [str(wheel)]}
    )
    assert answer.status_code == 200
    assert "sp-demo-pkg" in answer.json()["result"].lower().replace("_", "-")


async def test_read_endpoints(client: httpx.AsyncClient) -> None:
    await client.post(
        "/scratchpad/execute-stream",
        json={"name": "read", "code": "print('hi')", "description": "greet"},
    )
    [listed] = (await client.get("/v1/pads")).json()["pads"]
    old_fields = {"name": "read", "status": "idle", "cells": 1, "queued": 0}
    assert {key: listed[key] for key in old_fields} == old_fields  # clients of before still work
    cells = (await client.get("/v1/pads/read")).json()["cells"]
    assert cells[0]["stdout"] == "hi\n"
    dump = await client.get("/v1/pads/read/dump")
    assert dump.headers["content-type"].startswith("text/markdown")
    assert "## [1] greet" in dump.text
    notebook = (await client.get("/v1/pads/read/notebook")).json()
    assert notebook["nbformat"] == 4
    assert (await client.get("/openapi.json")).status_code == 200


def named_file(disposition: str) -> tuple[str, str]:
    """(the ASCII stand-in, the UTF-8 name) of a Content-Disposition (RFC 6266, RFC 8187)."""
    assert disposition.isascii(), disposition
    found = re.fullmatch(
        r'attachment; filename="([ -~]*)"; filename\*=UTF-8\'\'([!-~]+)', disposition
    )
    assert found is not None, disposition
    return found[1], unquote(found[2], errors="strict")


@pytest.mark.parametrize("name", ["данные", 'a/"b" \\ 😀;%41'])
async def test_downloads_named_after_a_pad_carry_any_name(
    client: httpx.AsyncClient, name: str
) -> None:
    await client.post("/scratchpad/execute-stream", json={"name": name, "code": "1"})
    leaf = name.replace("/", "_").replace("\\", "_")  # a file's name, never a path
    for route, suffix in [("notebook", ".ipynb"), ("dump", ".md")]:
        answer = await client.get(f"/v1/pads/{quote(name, safe='')}/{route}")
        assert answer.status_code == 200, answer.text
        fallback, utf8 = named_file(answer.headers["content-disposition"])
        assert utf8 == leaf + suffix
        assert len(fallback) == len(utf8) and '"' not in fallback and "\\" not in fallback


async def test_healthz_is_open_and_everything_else_needs_the_key(
    client: httpx.AsyncClient,
) -> None:
    assert (await client.get("/healthz", headers={"Authorization": ""})).json() == {"ok": True}
    for headers in (
        {"Authorization": ""},
        {"Authorization": "Bearer wrong"},
        {"Authorization": KEY},
    ):
        answer = await client.get("/v1/pads", headers=headers)
        assert answer.status_code == 401
        assert "Authorization: Bearer" in answer.json()["error"]


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/scratchpad/start", b"{not json", 422, "JSON"),
        ("/scratchpad/start", {}, 422, "name: Field required"),
        ("/scratchpad/execute-stream", {"name": "p", "code": 5}, 422, "code:"),
        ("/scratchpad/install", {"name": "p", "packages": "six"}, 422, "packages:"),
        ("/scratchpad/start", {"name": ""}, 400, "invalid pad name"),
        ("/scratchpad/start", {"name": "tab\tname"}, 400, "control characters"),
    ],
)
async def test_bad_requests_get_a_clear_4xx(
    client: httpx.AsyncClient, path: str, body: Any, status: int, message: str
) -> None:
    if isinstance(body, bytes):
        answer = await client.post(path, content=body, headers={"content-type": "application/json"})
    else:
        answer = await client.post(path, json=body)
    assert answer.status_code == status, answer.text
    assert message in answer.json()["error"]


async def test_unknown_pads_on_read_endpoints(client: httpx.AsyncClient) -> None:
    answer = await client.get("/v1/pads/nobody")
    assert answer.status_code == 404 and "no pad named 'nobody'" in answer.json()["error"]


async def test_oversized_bodies_get_413(manager: ScratchpadManager) -> None:
    small = manager.settings.model_copy(update={"max_request_bytes": 2048})
    limited = ScratchpadManager(workspace=manager.workspace, settings=small)
    app = create_app(limited, api_key=KEY)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t", headers=AUTH
    ) as http:
        answer = await http.post(
            "/scratchpad/execute-stream", json={"name": "p", "code": "x" * 5000}
        )
        body = json.dumps({"name": "p", "code": "y" * 5000}).encode()

        async def chunked() -> AsyncIterator[bytes]:  # no content-length: sent chunked
            for start in range(0, len(body), 1000):
                yield body[start : start + 1000]

        streamed = await http.post("/scratchpad/execute-stream", content=chunked())
        fits = await http.post(
            "/scratchpad/start", content=_once(b'{"name": "small"}'), headers=JSON
        )
    assert answer.status_code == 413 and "over the 2048-byte limit" in answer.json()["error"]
    assert streamed.status_code == 413 and "more than 2048" in streamed.json()["error"]
    assert fits.json() == {"ok": True}
    assert limited.names() == ["small"]
    await limited.close_all()


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def test_server_identity_and_no_way_around_the_key(client: httpx.AsyncClient) -> None:
    identity = (await client.get("/v1/server")).json()
    assert identity["pid"] == os.getpid() and identity["running_pads"] == []
    preflight = {"Authorization": "", "Access-Control-Request-Method": "POST", "Origin": "x"}
    for method, path in (("OPTIONS", "/mcp"), ("GET", "/healthz/"), ("GET", "//v1/pads")):
        answer = await client.request(method, path, headers=preflight)
        assert answer.status_code == 401, (method, path)


@pytest.mark.parametrize("path", ["/mcp", "/v1/pads", "/static/app.js", "/", "/healthz"])
async def test_a_websocket_scope_is_refused_before_anything_else(
    manager: ScratchpadManager, path: str
) -> None:
    """However it came (any server, any WebSocket library), with the key or without."""
    app = create_app(manager, api_key=KEY)
    incoming: list[Message] = [{"type": "websocket.connect"}]
    sent: list[Message] = []

    async def receive() -> Message:
        return incoming.pop(0) if incoming else {"type": "websocket.disconnect", "code": 1000}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "websocket",
        "asgi": {"version": "3.0"},
        "scheme": "ws",
        "http_version": "1.1",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8765"), (b"authorization", f"Bearer {KEY}".encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8765),
        "subprotocols": [],
        "state": {},
    }
    await app(scope, receive, send)
    assert len(sent) == 1 and sent[0]["type"] == "websocket.close", sent
    assert sent[0]["code"] == 1008 and "no WebSocket" in sent[0]["reason"]
    assert "auth" not in scope["state"]  # refused before the guard looked at who it was


def test_api_key_is_generated_once_and_kept_private(settings: Settings) -> None:
    key = resolve_api_key(settings)
    assert len(key) >= 32 and resolve_api_key(settings) == key
    assert stat.S_IMODE(key_path(settings).stat().st_mode) == 0o600
    assert resolve_api_key(settings.model_copy(update={"api_key": "given"})) == "given"


async def test_a_refused_key_says_how_to_authenticate(client: httpx.AsyncClient) -> None:
    answer = await client.get("/v1/pads", headers={"Authorization": "Bearer wrong"})
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    ("method", "path", "status", "words"),
    [
        ("GET", "/nowhere", 404, "no such route: GET /nowhere"),
        ("GET", "/scratchpad/start", 405, "method not allowed"),
        ("DELETE", "/v1/pads", 405, "method not allowed"),
    ],
)
async def test_unknown_routes_and_methods_answer_in_the_documented_shape(
    client: httpx.AsyncClient, method: str, path: str, status: int, words: str
) -> None:
    answer = await client.request(method, path)
    assert answer.status_code == status
    assert words in answer.json()["error"]


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/scratchpad/start", "POST"),
        ("DELETE", "/v1/pads", "GET"),
        ("PATCH", "/v1/pads/p/files/a.txt", "DELETE, GET, HEAD, PUT"),  # four routes, one path
        ("PATCH", "/v1/pads/a%2Fb/files/x/y.txt", "DELETE, GET, HEAD, PUT"),
        ("POST", "/static/app.js", "GET, HEAD"),  # the static files' own 405
        ("POST", "/", "GET"),
    ],
)
async def test_a_405_says_which_methods_the_path_takes(
    client: httpx.AsyncClient, method: str, path: str, allowed: str
) -> None:
    answer = await client.request(method, path)
    assert answer.status_code == 405
    assert answer.headers["allow"] == allowed
    assert answer.json()["type"] == "MethodNotAllowed"
    assert answer.json()["error"].endswith(f"{method} {path}; it takes {allowed}")
    for each in allowed.split(", "):  # and each of them is taken there
        assert (await client.request(each, path)).status_code != 405, each


async def test_errors_name_their_class(client: httpx.AsyncClient) -> None:
    answer = await client.get("/v1/pads/ghost")
    assert answer.status_code == 404
    assert answer.json()["type"] == "PadNotFoundError"
    bad = await client.post("/scratchpad/start", json={"name": ""})
    assert (bad.status_code, bad.json()["type"]) == (400, "InvalidPadNameError")


async def test_cancel_and_reset_of_a_pad_that_is_gone_answer_that_nothing_was_done(
    client: httpx.AsyncClient, manager: ScratchpadManager
) -> None:
    """Another client removed the pad: Anton's client raises on any status >= 400."""
    await client.post("/scratchpad/execute-stream", json={"name": "gone", "code": "1"})
    await manager.remove("gone")
    cancel = await client.post("/scratchpad/cancel", json={"name": "gone"})
    assert (cancel.status_code, cancel.json()) == (200, {"ok": True, "cancelled": False})
    reset = await client.post("/scratchpad/reset", json={"name": "gone"})
    assert (reset.status_code, reset.json()) == (200, {"ok": True, "reset": False})
    assert not manager.exists("gone")  # nothing was made by asking


@pytest.mark.parametrize(
    "spec", ["-r", "-r requirements.txt", "six --pre", "--index-url=https://example.invalid/simple"]
)
async def test_an_option_as_a_package_answers_as_a_failed_install(
    client: httpx.AsyncClient, spec: str
) -> None:
    answer = await client.post("/scratchpad/install", json={"name": "p", "packages": [spec]})
    assert answer.status_code == 200
    assert answer.json()["result"].startswith(f"Install failed (refused): {spec!r} is an option")


async def test_install_over_the_protocol_reports_failures_as_its_result(
    client: httpx.AsyncClient, tmp_path: Any
) -> None:
    empty = await client.post("/scratchpad/install", json={"name": "inst", "packages": []})
    assert empty.status_code == 200 and empty.json() == {"result": "No packages specified."}
    missing = tmp_path / "missing-1.0-py3-none-any.whl"
    failed = await client.post(
        "/scratchpad/install", json={"name": "inst", "packages": [str(missing)]}
    )
    assert failed.status_code == 200
    assert failed.json()["result"].startswith("Install failed (exit ")


@pytest.mark.parametrize("estimate", [-1, "NaN", "Infinity"])
async def test_a_meaningless_estimate_means_no_estimate(
    client: httpx.AsyncClient, estimate: object
) -> None:
    body = f'{{"name": "est", "code": "6 * 7", "estimated_seconds": {json.dumps(estimate)}}}'
    if isinstance(estimate, str):
        body = body.replace(f'"{estimate}"', estimate)  # JSON's NaN/Infinity literals
    answer = await client.post("/scratchpad/execute-stream", content=body, headers=JSON)
    cell = frames(answer.text)[-1]["cell"]
    assert (cell["status"], cell["result"]) == ("ok", "42")


async def test_cleanup_of_an_unknown_pad_is_fine(client: httpx.AsyncClient) -> None:
    answer = await client.post("/scratchpad/cleanup", json={"name": "never-was"})
    assert answer.json() == {"ok": True}


async def test_start_sets_the_pads_own_model(client: httpx.AsyncClient) -> None:
    body = {
        "name": "llm",
        "coding_provider": "openai-compatible",
        "coding_model": "local-model",
        "coding_api_key": "sk-pad-only-key",
        "coding_base_url": "http://127.0.0.1:9/v1",
    }
    assert (await client.post("/scratchpad/start", json=body)).json() == {"ok": True}
    code = (
        "import os\n"
        "[os.environ.get(k) for k in "
        "('SCRATCHPAD_MODEL', 'OPENAI_API_KEY', 'OPENAI_BASE_URL')]"
    )
    answer = await client.post("/scratchpad/execute-stream", json={"name": "llm", "code": code})
    assert frames(answer.text)[-1]["cell"]["result"] == repr(  # the key, scrubbed on its way out
        ["openai-compatible:local-model", "[OPENAI_API_KEY]", "http://127.0.0.1:9/v1"]
    )
    assert "sk-pad-only-key" not in os.environ.values()  # only the pad's environment
    unknown = await client.post("/scratchpad/start", json={"name": "llm", "coding_provider": "x"})
    assert unknown.status_code == 400 and "coding_provider" in unknown.json()["error"]


async def test_the_pad_list_counts_stopped_histories_off_the_event_loop(
    client: httpx.AsyncClient, manager: ScratchpadManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from scratchpad.runtime import history, padinfo

    await client.post("/scratchpad/execute-stream", json={"name": "s", "code": "1"})
    await manager.close("s")
    threads: list[str] = []
    counted = history.count_cells

    def count(path: Any) -> int:
        threads.append(threading.current_thread().name)
        return counted(path)

    monkeypatch.setattr(padinfo, "count_cells", count)
    for _ in range(2):
        [listed] = (await client.get("/v1/pads")).json()["pads"]
        assert {key: listed[key] for key in ("name", "status", "cells", "queued")} == {
            "name": "s", "status": "stopped", "cells": 1, "queued": 0,
        }  # fmt: skip
    assert threads and threading.main_thread().name not in threads
    assert len(threads) == 1  # the second listing reused the count: the file did not change


async def test_a_bad_model_setting_is_refused_and_the_pad_stays_usable(
    client: httpx.AsyncClient,
) -> None:
    for bad in ("gpt\u0000x", "gpt\ud800x", "two\nlines"):
        body = {"name": "m", "coding_provider": "openai", "coding_model": bad}
        answer = await client.post("/scratchpad/start", content=json.dumps(body), headers=JSON)
        assert answer.status_code == 400, answer.text
        assert "coding_model must be text without control characters" in answer.json()["error"]
    after = await client.post("/scratchpad/execute-stream", json={"name": "m", "code": "6 * 7"})
    assert frames(after.text)[-1]["cell"]["result"] == "42"
    assert (await client.post("/scratchpad/reset", json={"name": "m"})).status_code == 200


@pytest.mark.parametrize("spec", ["six\u0000", "six\ud800", "six\x1b[2J"])
async def test_a_package_spec_with_control_characters_is_refused(
    client: httpx.AsyncClient, spec: str
) -> None:
    body = json.dumps({"name": "i", "packages": [spec]})  # \ud800 travels as a JSON escape
    answer = await client.post("/scratchpad/install", content=body, headers=JSON)
    assert answer.status_code == 400 and "control character" in answer.json()["error"]


@pytest.mark.parametrize(
    ("extra", "status", "words"),
    [
        ({"timeout_s": True}, 422, "timeout_s"),
        ({"timeout_s": "5"}, 422, "timeout_s"),
        ({"id": ""}, 400, "cell id '' is not allowed"),
        ({"id": "a/b"}, 400, "cell id 'a/b' is not allowed"),
    ],
)
async def test_execute_extensions_are_checked_before_anything_runs(
    client: httpx.AsyncClient, extra: dict[str, Any], status: int, words: str
) -> None:
    answer = await client.post(
        "/scratchpad/execute-stream", json={"name": "x", "code": "1", **extra}
    )
    assert answer.status_code == status and words in answer.json()["error"], answer.text


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-1", "0", "1e9"])
async def test_a_meaningless_timeout_is_refused_before_a_pad_starts(
    client: httpx.AsyncClient, manager: ScratchpadManager, value: str
) -> None:
    body = f'{{"name": "t", "code": "1", "timeout_s": {value}}}'  # JSON's NaN as Python reads it
    answer = await client.post("/scratchpad/execute-stream", content=body, headers=JSON)
    assert answer.status_code == 400, answer.text
    assert "timeout_s must be a number of seconds > 0 and at most 3600" in answer.json()["error"]
    assert manager.names() == []


async def test_a_cell_cancelled_before_its_pad_existed_never_runs(
    client: httpx.AsyncClient,
) -> None:
    early = await client.post("/scratchpad/cancel", json={"name": "fresh", "id": "c1"})
    assert early.json() == {"ok": True, "cancelled": False}  # nothing there yet ...
    body = {"name": "fresh", "code": "ran = True", "id": "c1"}
    cell = frames((await client.post("/scratchpad/execute-stream", json=body)).text)[-1]["cell"]
    assert cell["status"] == "cancelled" and "nothing ran" in cell["error"]  # ... and never


async def test_every_error_answer_names_its_kind(client: httpx.AsyncClient) -> None:
    assert (await client.get("/nowhere")).json()["type"] == "NotFound"
    assert (await client.delete("/v1/pads")).json()["type"] == "MethodNotAllowed"
    refused = await client.get("/v1/pads", headers={"Authorization": "Bearer no"})
    assert refused.json()["type"] == "UnauthorizedError"
    broken = await client.post("/scratchpad/start", content=b"{nope", headers=JSON)
    assert broken.json()["type"] == "InvalidInputError"
    assert "the body is not valid JSON" in broken.json()["error"]


@pytest.mark.parametrize(
    ("limits", "status", "words"),
    [
        ({"memory_mb": True}, 422, "memory_mb"),
        ({"memory_mb": "100"}, 422, "memory_mb"),
        ({"memory": 5}, 422, "memory"),
        ({"processes": 1}, 400, "a kernel needs that many to start"),
        ({"disk_mb": 10**30}, 400, "out of range"),
    ],
)
async def test_a_start_with_a_bad_limit_says_what_is_wrong_and_starts_nothing(
    client: httpx.AsyncClient,
    manager: ScratchpadManager,
    limits: dict[str, object],
    status: int,
    words: str,
) -> None:
    answer = await client.post("/scratchpad/start", json={"name": "p", "limits": limits})
    assert answer.status_code == status, answer.text
    assert words in answer.json()["error"]
    assert manager.names() == []
    good = await client.post("/scratchpad/start", json={"name": "p", "limits": {"disk_mb": 64}})
    assert good.status_code == 200, good.text
