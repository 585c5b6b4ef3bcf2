"""What the server refuses, the document says: a text slice's ``field`` is an enum, counts
are >= 0, a cell id has its pattern and length, on a real server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx

from scratchpad.runtime.base import CELL_ID
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
