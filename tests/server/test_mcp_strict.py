"""An Agents-SDK-style strict client over ``/mcp`` of a real ``scratchpad serve``: it makes
every property of a tool's schema required, so its model sends a value for each, the empty
one (``""``, ``0``, ``[]``, ``false``, ``{}``) for "none"; the pad reads those as absent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.server.test_mcp import texts
from tests.server_helpers import running_server

KEY = "mcp-strict-key"
EMPTY = {"string": "", "number": 0, "integer": 0, "array": [], "boolean": False, "object": {}}


def strict_arguments(schema: dict[str, Any], **chosen: Any) -> dict[str, Any]:
    """Every property of ``schema``: the chosen values, the empty one of its type else; what a
    model held to the schema can send, so it must be valid (a client may check it)."""
    properties: dict[str, dict[str, Any]] = schema["properties"]
    arguments = {key: chosen.get(key, EMPTY[spec["type"]]) for key, spec in properties.items()}
    Draft202012Validator(schema).validate(arguments)
    return arguments


async def test_a_strict_client_drives_a_pad(tmp_path: Path) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _process):
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
        ):
            listed = await client.list_tools()
            schema = next(t.input_schema for t in listed.tools if t.name == "scratchpad")

            async def call(**chosen: Any) -> tuple[bool, str]:
                answer = await client.call_tool("scratchpad", strict_arguments(schema, **chosen))
                return bool(answer.is_error), texts(answer)

            first = await call(action="exec", name="p", code="x = 41")
            second = await call(action="exec", name="p", code="x + 1")
            listing = await call(action="list")
            nameless = await call(action="view")
    assert first == (False, "Code executed successfully (no output).")
    assert second == (False, "[result]\n42")
    assert listing == (False, "1 pad(s):\n- 'p': idle, 2 cell(s)")
    assert nameless[0] and "missing required field 'name'" in nameless[1]
