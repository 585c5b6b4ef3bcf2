"""Pending credential forms as a model opens them: ``request_credentials`` over the server's
MCP endpoint, from a client without URL elicitation (so the answer carries the form's link at
once). The MCP client is async; it runs on a thread of its own, away from the thread whose
event loop Playwright's sync API holds."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.web.conftest import WebServer


def request_credentials(server: WebServer, arguments: dict[str, Any]) -> str:
    """The text of one ``request_credentials`` call (an error result fails the test)."""

    async def call() -> str:
        headers = {"Authorization": f"Bearer {server.key}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client,
        ):
            result = await client.call_tool("request_credentials", arguments)
        text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
        assert not result.is_error, text
        return text

    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(anyio.run, call).result(timeout=120)


def open_form(server: WebServer, spec: dict[str, Any]) -> tuple[str, str]:
    """(the one-time link the person gets, the form's id) of a new pending form."""
    text = request_credentials(server, spec)
    link = next(word for word in text.split() if word.startswith(f"{server.url}/"))
    found = re.search(r'\{"form_id": "([^"]+)"\}', text)
    assert found is not None, text
    return link, found.group(1)
