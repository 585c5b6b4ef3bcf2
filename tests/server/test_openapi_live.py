"""The document against a real server: what the server refuses, it says (a text slice's
``field`` as an enum, counts >= 0, a cell id's pattern and length); a stream is described per
event (OpenAPI 3.2 ``itemSchema``: ``id``, ``event`` and ``data`` lines, the frame as the
data's content schema), and the events sent match it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
from jsonschema import Draft202012Validator

from scratchpad.runtime.cell import CELL_ID
from scratchpad.server.pad_feed_routes import TEXT_FIELDS
from tests.server_helpers import running_server

KEY = "test-key"
SLICE = "/v1/pads/{name}/cells/{cell_id}/text"


def _parameters(doc: dict[str, Any], path: str) -> dict[str, dict[str, Any]]:
    return {p["name"]: p["schema"] for p in doc["paths"][path]["get"]["parameters"]}


def test_the_document_states_the_constraints_the_server_enforces(tmp_path: Path) -> None:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _):
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
            doc = http.get("/openapi.json").json()
            sliced = _parameters(doc, SLICE)
            assert sliced["field"]["enum"] == list(TEXT_FIELDS)
            assert sliced["offset"]["minimum"] == 0 and sliced["length"]["minimum"] == 0
            pattern = f"^{CELL_ID.pattern}$"
            for schema in (
                sliced["cell_id"],
                _parameters(doc, "/v1/pads/{name}/cells/{cell_id}")["cell_id"],
            ):
                assert schema["pattern"] == pattern and schema["maxLength"] == 64
            bodies = doc["components"]["schemas"]
            for model in ("ExecuteRequest", "CancelRequest"):
                (given,) = [s for s in bodies[model]["properties"]["id"]["anyOf"] if "pattern" in s]
                assert given["pattern"] == pattern and given["maxLength"] == 64
            # ... and the server refuses what the document rules out
            ran = http.post(
                "/scratchpad/execute-stream", json={"name": "p", "code": "1", "id": "ok-1"}
            )
            assert ran.status_code == 200 and '"cell"' in ran.text
            good = http.get("/v1/pads/p/cells/ok-1/text", params={"field": "result"})
            assert good.status_code == 200 and good.json()["text"] == "1"
            for field in ("code", "STDOUT", ""):
                bad = http.get("/v1/pads/p/cells/ok-1/text", params={"field": field})
                assert bad.status_code == 400 and "stdout" in bad.json()["error"], field
            negative = http.get("/v1/pads/p/cells/ok-1/text", params={"offset": -1})
            assert negative.status_code == 400
            for bad_id in ("has space", "x" * 65, "é"):
                assert not re.fullmatch(pattern, bad_id)
                for path, body in (
                    ("/scratchpad/execute-stream", {"name": "p", "code": "1", "id": bad_id}),
                    ("/scratchpad/cancel", {"name": "p", "id": bad_id}),
                ):
                    assert http.post(path, json=body).status_code == 400, (path, bad_id)
                for path in (f"/v1/pads/p/cells/{bad_id}", f"/v1/pads/p/cells/{bad_id}/text"):
                    refused = http.get(path)
                    assert refused.status_code == 400, (path, refused.text)
                    assert "1-64 letters" in refused.json()["error"]
            assert http.get("/v1/pads/p/cells/no-such").status_code == 404  # well formed


def _events(lines: Iterable[str], count: int | None = None) -> list[dict[str, str]]:
    """Server-sent events as objects of their fields (comments skipped), the first ``count``."""
    events: list[dict[str, str]] = []
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if fields:
                events.append(fields)
                fields = {}
                if count is not None and len(events) == count:
                    break
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            fields[name] = value
    return events


def _check(doc: dict[str, Any], item: dict[str, Any], events: list[dict[str, str]]) -> None:
    """Each event valid against ``item``; its data's JSON against the content schema of the
    branch it matched."""
    components = {"components": doc["components"]}
    for event in events:
        Draft202012Validator({**item, **components}).validate(event)
        branches = [
            branch
            for branch in item.get("oneOf", [item])
            if Draft202012Validator({**branch, **components}).is_valid(event)
        ]
        assert len(branches) == 1, event
        content = branches[0]["properties"]["data"]["contentSchema"]
        Draft202012Validator({**content, **components}).validate(json.loads(event["data"]))


def test_streams_are_described_per_event(tmp_path: Path) -> None:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _):
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
            doc = http.get("/openapi.json").json()
            assert doc["openapi"] == "3.2.0"

            def item(path: str, method: str) -> dict[str, Any]:
                media = doc["paths"][path][method]["responses"]["200"]["content"]
                assert (
                    list(media) == ["text/event-stream"]
                    and "schema" not in media["text/event-stream"]
                )
                return dict(media["text/event-stream"]["itemSchema"])

            run = item("/scratchpad/execute-stream", "post")
            assert run["required"] == ["data"] and "event" not in run["properties"]
            data = run["properties"]["data"]
            assert data["contentMediaType"] == "application/json"
            assert "Cell" in json.dumps(data["contentSchema"])
            feed = item("/v1/pads/{name}/events", "get")
            assert feed["required"] == ["data", "id"]
            named = item("/v1/datavault/submissions", "post")["oneOf"]
            kinds = [branch["properties"]["event"]["enum"] for branch in named]
            assert ["response.created"] in kinds and all(b["required"][1] == "event" for b in named)

            code = "progress('half')\nprint('out')\n41 + 1"
            body = {"name": "p", "code": code, "stream_output": True}
            with http.stream("POST", "/scratchpad/execute-stream", json=body) as answer:
                events = _events(answer.iter_lines())
            assert [json.loads(e["data"])["type"] for e in events][-1] == "cell"
            _check(doc, run, events)
            with http.stream("GET", "/v1/pads/p/events") as answer:
                first = _events(answer.iter_lines(), count=1)
            assert first[0]["id"] == "0"
            _check(doc, feed, first)
