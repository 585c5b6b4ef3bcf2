"""The OpenAPI document tells the truth: every route is in it, and real answers of the app
(in-process) validate against the schemas it declares for their status and content type."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from copy import deepcopy
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute
from jsonschema import Draft202012Validator
from starlette.routing import Mount, Route

from scratchpad.config import Settings
from scratchpad.connect.flow import ResponseEvents
from scratchpad.connect.submissions import Submissions
from scratchpad.errors import PadClosedError
from scratchpad.events import wire
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.app import create_app
from scratchpad.server.browser_auth import SESSION_HEADER, SIGNABLE
from scratchpad.server.frames import error_frame
from scratchpad.server.guard import OPEN_PATHS
from scratchpad.server.openapi import document
from tests.connect.services import http_form
from tests.images import PNG

KEY = "test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
NOT_API = {"/openapi.json", "/static"}  # the document itself; the web UI's files
PAGES = {"/", "/docs", "/login", "/connect/{form_id}"}  # HTML for people, not API
RICH_CELL = (
    "progress('half')\n"
    "print('out')\n"
    "class Picture:\n"
    "    def _repr_png_(self):\n"
    f"        return {PNG!r}\n"
    "display(Picture())\n"
    "41 + 1"
)


@pytest.fixture
async def client(
    settings: Settings, workspace: Path, tmp_path: Path
) -> AsyncIterator[httpx.AsyncClient]:
    script = tmp_path / "probe.json"
    script.write_text(json.dumps(["Done."]))
    settings = settings.model_copy(update={"probe_model": f"scripted:{script}"})
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        app = create_app(manager, api_key=KEY)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://test", headers=AUTH
        ) as http:
            yield http


class Checker:
    """Validates answers against the document the app serves."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.checked: set[tuple[str, str, str]] = set()
        self.components = deepcopy(doc["components"])
        for schema in self.components["schemas"].values():  # an undocumented key fails
            if "properties" in schema:
                schema.setdefault("additionalProperties", False)

    def schema(self, method: str, path: str, status: int, media: str) -> dict[str, Any]:
        responses = self.doc["paths"][path][method.lower()]["responses"]
        assert str(status) in responses, f"{method} {path} answered an undocumented {status}"
        content = responses[str(status)]["content"]
        assert media in content, f"{method} {path} {status}: {media} not in {list(content)}"
        self.checked.add((method, path, str(status)))
        return {**frame_schema(content[media]), "components": self.components}

    def valid(self, value: Any, method: str, path: str, status: int, media: str) -> None:
        Draft202012Validator(self.schema(method, path, status, media)).validate(value)

    def answer(self, answer: httpx.Response, method: str, path: str) -> Any:
        """The answer's JSON, validated against its documented status and content type."""
        media = answer.headers["content-type"].split(";")[0]
        body = answer.json()
        self.valid(body, method, path, answer.status_code, media)
        return body

    def download(self, answer: httpx.Response, method: str, path: str) -> None:
        """A file's answer: its media type or the most specific range documented (type/*,
        then */*), and every documented header present and valid."""
        assert answer.status_code == 200, answer.text
        media = answer.headers["content-type"].split(";")[0]
        responses = self.doc["paths"][path][method.lower()]["responses"]["200"]
        for candidate in (media, media.split("/")[0] + "/*", "*/*"):
            if candidate in responses["content"]:
                self.valid(answer.text, method, path, 200, candidate)
                break
        else:
            raise AssertionError(f"{method} {path}: {media} not in {list(responses['content'])}")
        self.headers(answer, method, path)

    def headers(self, answer: httpx.Response, method: str, path: str) -> None:
        """Every header documented for the answer's status present and valid."""
        response = self.doc["paths"][path][method.lower()]["responses"][str(answer.status_code)]
        for name, header in response.get("headers", {}).items():
            assert name in answer.headers, f"{method} {path}: no {name} header"
            Draft202012Validator(header["schema"]).validate(answer.headers[name])

    def frames(self, answer: httpx.Response, method: str, path: str) -> list[dict[str, Any]]:
        assert answer.status_code == 200, answer.text
        media = answer.headers["content-type"].split(";")[0]
        assert media == "text/event-stream"
        frames = [
            json.loads(line[len("data: ") :])
            for line in answer.text.splitlines()
            if line.startswith("data: ")
        ]
        for frame in frames:
            self.valid(frame, method, path, 200, media)
        return frames


def frame_schema(media: dict[str, Any]) -> dict[str, Any]:
    """A media type's schema; for a stream, its frames' (its events' ``data`` content)."""
    if "itemSchema" not in media:
        return dict(media["schema"])
    item = media["itemSchema"]
    events = item.get("oneOf", [item])
    contents = [event["properties"]["data"]["contentSchema"] for event in events]
    return contents[0] if len(contents) == 1 else {"oneOf": contents}


@pytest.fixture
async def checker(client: httpx.AsyncClient) -> Checker:
    answer = await client.get("/openapi.json")
    assert answer.status_code == 200
    return Checker(answer.json())


def test_every_route_of_the_app_is_documented(manager: ScratchpadManager) -> None:
    app = create_app(manager, api_key=KEY)
    doc = document(app)
    missing = []
    for route in app.routes:
        if isinstance(route, APIRoute):
            if not route.include_in_schema:
                assert route.path in PAGES, f"{route.path} is hidden from the document"
                continue
            path = route.path_format  # as OpenAPI writes it: {path}, not {path:path}
            documented = doc["paths"].get(path, {})
            missing += [f"{m} {path}" for m in route.methods or () if m.lower() not in documented]
        elif isinstance(route, Route | Mount) and route.path not in NOT_API:
            missing += [route.path] if route.path not in doc["paths"] else []
    assert not missing


async def test_the_routes_left_out_are_pages(client: httpx.AsyncClient) -> None:
    for path in PAGES:
        answer = await client.get(path.replace("{form_id}", "fm_1"))
        assert answer.headers["content-type"].startswith("text/html"), path


def test_every_operation_declares_its_answers_and_the_key(manager: ScratchpadManager) -> None:
    doc = document(create_app(manager, api_key=KEY))
    schemes = doc["components"]["securitySchemes"]
    assert schemes["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "The server's API key.",
    }
    assert schemes["session"]["in"] == "header" and schemes["session"]["type"] == "apiKey"
    assert schemes["session"]["name"] == SESSION_HEADER == "x-scratchpad-session"
    assert schemes["signed"]["in"] == "query" and schemes["signed"]["name"] == "sig"
    assert "cookie" not in {scheme.get("in") for scheme in schemes.values()}
    assert doc["security"] == [{"bearer": []}, {"session": []}]  # either one
    downloads: list[dict[str, list[str]]] = [{"bearer": []}, {"session": []}, {"signed": []}]
    assert all(doc["paths"][path]["get"]["security"] == downloads for path in SIGNABLE)
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            where = f"{method.upper()} {path}"
            responses = operation["responses"]
            if path in OPEN_PATHS:
                assert operation["security"] == [], where
            else:
                if path not in SIGNABLE or method not in ("get", "head"):
                    assert "security" not in operation, where
                assert "401" in responses and "403" in responses, where
            for status, response in responses.items():
                if status.startswith(("4", "5")):
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorBody"}, where
            if path != "/mcp":
                assert any(status.startswith(("2", "3")) for status in responses), where
                for status, response in responses.items():
                    for media in response.get("content", {}).values():
                        schema = frame_schema(media)  # a model, frames, or text: never a bare dict
                        typed = (
                            "$ref" in schema or "oneOf" in schema or schema.get("type") == "string"
                        )
                        assert typed, f"{where} {status}: untyped (declare it with answers())"


def test_every_pad_name_carries_the_name_rule(manager: ScratchpadManager) -> None:
    doc = document(create_app(manager, api_key=KEY))
    rule = {"minLength": 1, "maxLength": 128, "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"}
    named = 0
    for path, item in doc["paths"].items():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                if path.startswith(f"/v1/pads/{{{parameter['name']}}}"):
                    assert rule.items() <= parameter["schema"].items(), path
                    named += 1
    for model in ("PadRequest", "StartRequest", "CancelRequest", "InstallRequest"):
        name = doc["components"]["schemas"][model]["properties"]["name"]
        assert rule.items() <= name.items(), model
        assert "control characters" in name["description"]
    assert named >= 7


def test_a_cell_stream_documents_its_resume_point(manager: ScratchpadManager) -> None:
    doc = document(create_app(manager, api_key=KEY))
    operation = doc["paths"]["/v1/pads/{name}/cells/{cell_id}/events"]["get"]
    headers = {p["name"].lower(): p for p in operation["parameters"] if p["in"] == "header"}
    assert "<cell>:<seq>" in headers["last-event-id"]["description"]
    event = operation["responses"]["200"]["content"]["text/event-stream"]["itemSchema"]
    frames = {ref["$ref"].rsplit("/", 1)[1] for ref in event["properties"]["data"]
              ["contentSchema"]["oneOf"]}  # fmt: skip
    assert "NumberedQueued" in frames and "NumberedResync" in frames
    numbered = doc["components"]["schemas"]["NumberedOutput"]
    assert {"type", "id", "stream", "text", "seq", "gen"} <= set(numbered["required"])
    answer = doc["paths"]["/v1/pads/{name}/cells/{cell_id}"]["get"]["responses"]["200"]
    standing = answer["content"]["application/json"]["schema"]
    assert standing["discriminator"]["propertyName"] == "status"


async def test_pad_answers_validate_against_the_document(
    client: httpx.AsyncClient, checker: Checker
) -> None:
    run = {"name": "p", "code": RICH_CELL, "stream_output": True}
    frames = checker.frames(
        await client.post("/scratchpad/execute-stream", json=run),
        "POST",
        "/scratchpad/execute-stream",
    )
    kinds = [f["type"] for f in frames]  # output and progress travel on separate channels
    assert sorted(kinds[:-1]) == ["display", "output", "progress"] and kinds[-1] == "cell"
    plain = checker.frames(
        await client.post("/scratchpad/execute-stream", json={"name": "p", "code": "x = 1"}),
        "POST",
        "/scratchpad/execute-stream",
    )
    cell_id = plain[-1]["cell"]["id"]
    checker.valid(wire(error_frame(PadClosedError("gone"))), "POST", "/scratchpad/execute-stream",
                  200, "text/event-stream")  # fmt: skip
    for method, path, body in [
        ("POST", "/scratchpad/start", {"name": "p"}),
        ("POST", "/scratchpad/cancel", {"name": "p"}),
        ("POST", "/scratchpad/install", {"name": "p", "packages": []}),
        ("POST", "/scratchpad/reset", {"name": "p"}),
    ]:
        checker.answer(await client.post(path, json=body), method, path)
    for url, path in [
        ("/healthz", "/healthz"),
        ("/v1/server", "/v1/server"),
        ("/v1/pads", "/v1/pads"),
        ("/v1/pads/p", "/v1/pads/{name}"),
        (f"/v1/pads/p/cells/{cell_id}", "/v1/pads/{name}/cells/{cell_id}"),
        ("/v1/pads/p/notebook", "/v1/pads/{name}/notebook"),
    ]:
        answer = await client.get(url)
        checker.answer(answer, "GET", path)
        checker.headers(answer, "GET", path)
    dump = await client.get("/v1/pads/p/dump")
    checker.valid(dump.text, "GET", "/v1/pads/{name}/dump", 200, "text/markdown")
    checker.headers(dump, "GET", "/v1/pads/{name}/dump")
    assert dump.headers["content-type"].startswith("text/markdown")


async def test_error_answers_validate_against_the_document(
    client: httpx.AsyncClient, checker: Checker
) -> None:
    stream = "/scratchpad/execute-stream"
    cases = [
        (client.post(stream, json={"name": "p", "code": "1"}, headers={"authorization": ""}), 401),
        (client.post(stream, json={"name": "bad\nname", "code": "1"}), 400),
        (client.post(stream, json={"name": "p"}), 422),
        (client.post(stream, content=b" " * (11 * 1024 * 1024), headers=JSON), 413),
    ]
    for request, status in cases:
        answer = await request
        assert answer.status_code == status, answer.text
        checker.answer(answer, "POST", stream)
    for url, path, status in [
        ("/v1/pads/nobody", "/v1/pads/{name}", 404),
        ("/v1/pads/nobody/dump", "/v1/pads/{name}/dump", 404),
        ("/v1/vault/audit?limit=-1", "/v1/vault/audit", 422),
        ("/v1/datavault/submissions/sub_0", "/v1/datavault/submissions/{submission_id}", 404),
        ("/v1/datasources/pg/nothing", "/v1/datasources/{engine}/{name}", 404),
    ]:
        answer = await client.get(url)
        assert answer.status_code == status, answer.text
        checker.answer(answer, "GET", path)


JSON = {"content-type": "application/json"}


async def test_a_server_without_a_probe_model_says_what_to_configure_before_any_stream(
    manager: ScratchpadManager,
) -> None:
    """No SCRATCHPAD_PROBE_MODEL, the default model, no provider key (the hermetic test
    environment): a documented 503 naming the settings, as JSON, not a stream."""
    transport = httpx.ASGITransport(app=create_app(manager, api_key=KEY))
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=AUTH) as http:
        checker = Checker((await http.get("/openapi.json")).json())
        submission = {"form_spec": http_form(), "values": {}, "skipped": []}
        for url, path, body in [
            ("/v1/datavault/submissions", "/v1/datavault/submissions", submission),
            ("/v1/datasources/pg/1/test", "/v1/datasources/{engine}/{name}/test", None),
        ]:
            answer = await http.post(url, json=body)
            assert answer.status_code == 503, answer.text
            refusal = checker.answer(answer, "POST", path)
            assert refusal["type"] == "ModelNotConfiguredError"
            for words in ("SCRATCHPAD_PROBE_MODEL", "SCRATCHPAD_MODEL", "ANTHROPIC_API_KEY"):
                assert words in refusal["error"], refusal["error"]


async def test_vault_answers_validate_against_the_document(
    client: httpx.AsyncClient, checker: Checker
) -> None:
    fields = {"host": "db", "password": "s3cret-value"}
    saved = await client.post("/v1/datasources", json={"engine": "pg", "fields": fields})
    record = checker.answer(saved, "POST", "/v1/datasources")
    assert record["fields"]["password"] == "********"
    engine_name = "/v1/datasources/{engine}/{name}"
    for method, url, path, body in [
        ("GET", "/v1/datasources", "/v1/datasources", None),
        ("GET", "/v1/datasources/pg/1", engine_name, None),
        ("POST", "/v1/datasources/validate", "/v1/datasources/validate", {"engine": "pg"}),
        ("POST", "/v1/pads/p/grants", "/v1/pads/{pad}/grants", {"engine": "pg", "name": "1"}),
        ("GET", "/v1/pads/p/grants", "/v1/pads/{pad}/grants", None),
        ("GET", "/v1/grants", "/v1/grants", None),
        ("DELETE", "/v1/pads/p/grants/pg/1", "/v1/pads/{pad}/grants/{engine}/{name}", None),
        ("GET", "/v1/vault/audit", "/v1/vault/audit", None),
        ("GET", "/v1/vault/description", "/v1/vault/description", None),
        ("DELETE", "/v1/datasources/pg/1", engine_name, None),
    ]:
        answer = await client.request(method, url, json=body)
        assert answer.status_code == 200, (url, answer.text)
        checker.answer(answer, method, path)


async def test_submission_streams_validate_against_the_document(
    client: httpx.AsyncClient, checker: Checker
) -> None:
    path = "/v1/datavault/submissions"
    body = {"form_spec": http_form(), "values": {}, "skipped": []}  # required fields empty
    answer = await client.post(path, json=body)
    frames = checker.frames(answer, "POST", path)
    assert frames[0]["type"] == "response.created"
    assert frames[-1]["response"]["status"] == "retry"
    submission_id = frames[-1]["response"]["submission_id"]
    info = await client.get(f"{path}/{submission_id}")
    checker.answer(info, "GET", "/v1/datavault/submissions/{submission_id}")
    events = ResponseEvents(Submissions().stage(http_form(), {}, []))
    for event in [
        events.thought("scratchpad.start", pad="probe", code="1"),
        events.failed("The connection could not be tested: no model.", "ConfigError"),
        events.completed("failed", "It failed.", error="refused", follow_up="Check the key."),
        events.completed("success", "Connected.", connection={"engine": "e", "name": "1"}),
    ]:
        checker.valid(event, "POST", path, 200, "text/event-stream")
