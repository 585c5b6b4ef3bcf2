"""``request_credentials`` over MCP against a real ``scratchpad serve``: URL elicitation (both
protocol eras), a decline, the link for a client without it, the stored spec of a pending form,
and the form scope of a one-form session."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from starlette.requests import Request

from scratchpad.config import Settings
from scratchpad.errors import ForbiddenError
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.app import create_app
from scratchpad.server.forms_routes import check_scope
from tests.connect.services import TOKEN, bearer_service, http_form
from tests.connect.test_over_http_and_cli import FAILURE, SUCCESS, script, sse
from tests.server_helpers import running_server

KEY = "mcp-form-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}
VARIABLES = ["DS_HTTP_API_KEY_1__BASE_URL", "DS_HTTP_API_KEY_1__API_KEY"]


class Tee(httpx2.AsyncByteStream):
    """A response body passed on as it comes, and kept."""

    def __init__(self, inner: httpx2.AsyncByteStream, seen: bytearray) -> None:
        self.inner, self.seen = inner, seen

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.seen += chunk
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class Recording(httpx2.AsyncBaseTransport):
    """Every byte of the MCP conversation, both ways."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.seen = bytearray()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.seen += await request.aread()
        answer = await self.inner.handle_async_request(request)
        assert isinstance(answer.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            answer.status_code,
            headers=answer.headers,
            stream=Tee(answer.stream, self.seen),
            extensions=answer.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def server(
    hermetic_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    monkeypatch.setenv("SCRATCHPAD_PROBE_MODEL", f"scripted:{script(tmp_path / 'p.json', SUCCESS)}")
    with running_server(hermetic_env, tmp_path, KEY) as running:
        yield running


@asynccontextmanager
async def mcp_client(
    url: str, recording: Recording, mode: str = "auto", **callbacks: Any
) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers=HEADERS, timeout=60, transport=recording) as http,
        Client(
            streamable_http_client(f"{url}/mcp", http_client=http), mode=mode, **callbacks
        ) as client,
    ):
        yield client


def texts(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def person(url: str, link: str) -> tuple[str, dict[str, str]]:
    """A person's browser opening the one-time link: the form's id (from the page the link
    goes on to) and the header of the session it gave, which may touch that form only."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as browser:  # no key
        page = await browser.get(link)
        assert page.status_code == 200 and "/static/login.js" in page.text, page.text
        answer = await browser.post("/login", json={"token": link.split("token=", 1)[1]})
        assert answer.status_code == 200, answer.text
        found = re.fullmatch(r"/connect/([^/]+)", answer.json()["next"])
        assert found is not None, answer.text
        return found.group(1), {"x-scratchpad-session": answer.json()["session"]}


async def fill_in(url: str, link: str, values: dict[str, str]) -> dict[str, Any]:
    """What the person's browser does with the link: log in for this form only, read the
    form, submit the values (with the spec as the page has it), read the stream to its end."""
    form_id, session = await person(url, link)
    async with httpx.AsyncClient(base_url=url, headers=session, timeout=60) as browser:
        assert (await browser.get("/v1/pads")).status_code == 403  # this form only
        form = (await browser.get(f"/v1/forms/{form_id}")).json()
        assert form["status"] == "open", form
        body = {"form_id": form_id, "form_spec": form["spec"], "values": values}
        answer = await browser.post("/v1/datavault/submissions", json=body, headers={"origin": url})
    assert answer.status_code == 200, answer.text
    response: dict[str, Any] = sse(answer.text)[-1][1]["response"]
    return response


def link_in(text: str, url: str) -> str:
    """The one-time link a tool result gives."""
    return next(word for word in text.split() if word.startswith(f"{url}/login?token="))


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # elicitation/create · InputRequiredResult
async def test_url_elicitation_completes_with_the_variable_names_and_no_value(
    server: tuple[str, subprocess.Popen[str]], mode: str
) -> None:
    url, process = server
    recording = Recording()
    asked: list[types.ElicitRequestParams] = []
    notices: list[Any] = []
    notes: list[str | None] = []
    waiting = anyio.Event()
    filled: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append(message)
        waiting.set()

    with bearer_service() as service:

        async def browser(link: str) -> None:
            await waiting.wait()  # the person fills it in while the call waits
            values = {"base_url": service, "api_key": TOKEN}
            response = await fill_in(url, link, values)
            assert response["status"] == "success"
            filled.append(response["form_id"])

        async with anyio.create_task_group() as people:

            async def elicit(
                ctx: ClientRequestContext, params: types.ElicitRequestParams
            ) -> types.ElicitResult:
                asked.append(params)
                assert isinstance(params, types.ElicitRequestURLParams)
                people.start_soon(browser, params.url)
                return types.ElicitResult(action="accept")

            async def on_message(message: Any) -> None:
                notices.append(message)

            with anyio.fail_after(120):
                async with mcp_client(url, recording, mode, elicitation_callback=elicit,
                                      message_handler=on_message) as client:  # fmt: skip
                    tools = {t.name for t in (await client.list_tools()).tools}
                    assert "request_credentials" in tools
                    arguments = http_form(subtitle="To read the test service's users.")
                    result = await client.call_tool(
                        "request_credentials", arguments, progress_callback=on_progress
                    )
    assert not result.is_error, texts(result)
    [params] = asked
    assert isinstance(params, types.ElicitRequestURLParams)
    assert params.url.startswith(f"{url}/login?token=")  # one-time, for this form only
    [form_id] = filled
    assert form_id.startswith("fm_")
    assert "Connect the test service" in params.message and "users" in params.message
    assert params.elicitation_id == (form_id if mode == "legacy" else None)  # gone in 2026
    assert notes and "Waiting for the person" in str(notes[0])
    assert "saved as http-api-key/1" in texts(result)
    assert all(name in texts(result) for name in VARIABLES)
    if mode == "legacy":
        done = [n for n in notices if isinstance(n, types.ElicitCompleteNotification)]
        assert [n.params.elicitation_id for n in done] == [form_id]
    assert TOKEN.encode() not in recording.seen and service.encode() not in recording.seen
    assert b"saved as http-api-key/1" in recording.seen  # the recording did see the answer
    process.terminate()
    assert TOKEN not in process.communicate(timeout=30)[0]


async def test_a_declined_form_is_answered_as_declined_and_takes_no_submission(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    asked: list[str] = []

    async def decline(
        ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        asked.append(params.url)
        return types.ElicitResult(action="decline")

    for mode in ("legacy", "auto"):
        async with mcp_client(url, Recording(), mode, elicitation_callback=decline) as client:
            result = await client.call_tool("request_credentials", http_form())
        assert not result.is_error and "declined" in texts(result)
        assert "Do not ask for the secret in the chat" in texts(result)
    async with httpx.AsyncClient(base_url=url, headers=HEADERS) as http:
        for link in asked:
            form_id, _ = await person(url, link)
            form = (await http.get(f"/v1/forms/{form_id}")).json()
            assert form["status"] == "declined" and form["connection"] is None
            body = {"form_id": form_id, "form_spec": form["spec"], "values": {}}
            late = await http.post("/v1/datavault/submissions", json=body)
            assert late.status_code == 409 and "declined" in late.json()["error"]
    assert len(asked) == 2


async def test_a_client_without_url_elicitation_gets_the_link_and_later_the_outcome(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    recording = Recording()
    with bearer_service() as service:
        async with mcp_client(url, recording) as client:
            with anyio.fail_after(5):  # at once: nothing to wait for
                first = await client.call_tool("request_credentials", http_form())
            text = texts(first)
            link = link_in(text, url)
            form_id = text.split('{"form_id": "', 1)[1].split('"', 1)[0]
            assert "works once" in text and "own browser" in text
            still = await client.call_tool("request_credentials", {"form_id": form_id})
            assert "still open" in texts(still)
            values = {"base_url": service, "api_key": TOKEN}
            assert (await fill_in(url, link, values))["status"] == "success"
            done = await client.call_tool("request_credentials", {"form_id": form_id})
            unknown = await client.call_tool("request_credentials", {"form_id": "fm_nope"})
            bad = await client.call_tool("request_credentials", {"engine": "x"})
    assert all(name in texts(done) for name in VARIABLES)
    assert unknown.is_error and "no pending form 'fm_nope'" in texts(unknown)
    assert bad.is_error and "title" in texts(bad)
    assert TOKEN.encode() not in recording.seen and service.encode() not in recording.seen


async def test_a_pending_forms_submission_uses_the_stored_spec(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    async with mcp_client(url, Recording()) as client:
        text = texts(await client.call_tool("request_credentials", http_form()))
    form_id, _ = await person(url, link_in(text, url))
    widened = http_form(form_id=form_id)
    widened["fields"] = [*widened["fields"], {"name": "extra"}]
    widened["fields"][1] = {"name": "api_key", "type": "text"}  # no longer a secret
    with bearer_service() as service:
        async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=60) as http:
            values = {"base_url": service, "api_key": TOKEN}
            body: dict[str, Any] = {"form_id": form_id, "form_spec": widened}
            refused = await http.post(
                "/v1/datavault/submissions", json={**body, "values": {**values, "extra": "x"}}
            )
            answer = await http.post("/v1/datavault/submissions", json={**body, "values": values})
            saved = (await http.get("/v1/datasources/http-api-key/1")).json()
            form = (await http.get(f"/v1/forms/{form_id}")).json()
    assert refused.status_code == 400 and "values.extra" in refused.json()["error"]
    assert sse(answer.text)[-1][1]["response"]["status"] == "success"
    assert "api_key" in json.dumps(saved["secure_keys"]) and TOKEN not in json.dumps(saved)
    assert form["status"] == "completed" and form["connection"]["variables"] == VARIABLES


async def test_a_one_form_session_reaches_only_its_form(
    settings: Settings, workspace: Path, tmp_path: Path
) -> None:
    probe = script(tmp_path / "p.json", FAILURE)
    settings = settings.model_copy(update={"probe_model": f"scripted:{probe}"})
    manager = ScratchpadManager(workspace=workspace, settings=settings)
    origin = "http://127.0.0.1:1"
    app = create_app(manager, api_key=KEY, origin=origin)
    mine = app.state.forms.open(http_form()).form_id
    other = app.state.forms.open(http_form()).form_id
    token = app.state.browser_sessions.grant(f"form:{mine}", f"/connect/{mine}")
    transport = httpx.ASGITransport(app=app)
    full = httpx.AsyncClient(transport=transport, base_url="http://t", headers=HEADERS)
    # a browser with the session of the form's one-time link: no key, its own origin
    scoped = httpx.AsyncClient(transport=transport, base_url=origin, headers={"origin": origin})
    values = {"base_url": "http://127.0.0.1:9", "api_key": "not-the-key-1"}

    def submit(client: httpx.AsyncClient, **body: Any) -> Any:
        return client.post("/v1/datavault/submissions", json={"values": values, **body})

    try:
        login = await scoped.post("/login", json={"token": token})
        assert login.status_code == 200 and login.json()["scope"] == f"form:{mine}"
        scoped.headers["x-scratchpad-session"] = login.json()["session"]
        stream = await submit(full, form_spec=http_form())
        foreign = sse(stream.text)[-1][1]["response"]["submission_id"]
        own = await submit(scoped, form_id=mine, form_spec={})
        own_id = sse(own.text)[-1][1]["response"]["submission_id"]
        answers = {
            "own form": await scoped.get(f"/v1/forms/{mine}"),
            "own submission": await scoped.get(f"/v1/datavault/submissions/{own_id}"),
            "other form": await scoped.get(f"/v1/forms/{other}"),
            "other submit": await submit(scoped, form_id=other, form_spec=http_form()),
            "no form id": await submit(scoped, form_spec=http_form()),
            "other submission": await scoped.get(f"/v1/datavault/submissions/{foreign}"),
            "saved test": await scoped.post("/v1/datasources/http-api-key/1/test"),
            "full access": await full.get(f"/v1/datavault/submissions/{foreign}"),
        }
    finally:
        await full.aclose()
        await scoped.aclose()
        await manager.close_all()
    codes = {name: answer.status_code for name, answer in answers.items()}
    assert codes == {"own form": 200, "own submission": 200, "other form": 403,
                     "other submit": 403, "no form id": 403, "other submission": 403,
                     "saved test": 403, "full access": 200}  # fmt: skip
    refusal = answers["other form"].json()
    assert refusal["type"] == "ForbiddenError" and mine in refusal["error"]
    assert sse(own.text)[-1][1]["response"]["status"] == "failed"  # the stored spec was used


def test_check_scope_without_a_scope_is_full_access_and_with_one_only_its_form() -> None:
    def request(**state: str) -> Request:
        return Request({"type": "http", "state": state})

    check_scope(request(), "fm_any")  # the attribute missing: the bearer key, full access
    check_scope(request(auth="key"), "fm_any")
    check_scope(request(auth="form:fm_a"), "fm_a")
    with pytest.raises(ForbiddenError, match="only fill in form 'fm_a'"):
        check_scope(request(auth="form:fm_a"), "fm_b")
