"""The routes the web UI's credential forms need: the known engines with their forms, and the
``/connect/{form_id}`` page (code anyone on the server's own host may load: the form itself is
read with the key or a browser session)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from scratchpad.config import Settings
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.app import create_app
from scratchpad.vault import Vault
from scratchpad.vault.engines import ENGINES
from scratchpad.vault.forms import check_spec

KEY = "test-key"


@pytest.fixture
async def app_client(workspace: Path, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    vault = Vault(settings.with_home(workspace / ".scratchpad"), keyring=None)
    manager = ScratchpadManager(workspace=workspace, settings=settings, vault=vault)
    transport = httpx.ASGITransport(app=create_app(manager, api_key=KEY))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        yield client
    await manager.close_all()


async def test_the_engines_route_lists_every_known_engine_with_a_valid_form(
    app_client: httpx.AsyncClient,
) -> None:
    answer = await app_client.get(
        "/v1/datasources/engines", headers={"Authorization": f"Bearer {KEY}"}
    )
    assert answer.status_code == 200, answer.text
    engines = answer.json()["engines"]
    assert [e["engine"] for e in engines] == list(ENGINES)
    postgres = next(e for e in engines if e["engine"] == "postgres")
    assert postgres["label"] == "PostgreSQL" and postgres["logo"] == "database"
    assert [f["name"] for f in postgres["form"]["fields"]][:2] == ["host", "port"]
    for engine in engines:
        assert check_spec(engine["form"])["engine"] == engine["engine"]


async def test_the_engines_route_and_the_form_need_the_key_and_the_page_does_not(
    app_client: httpx.AsyncClient,
) -> None:
    refused = await app_client.get("/v1/datasources/engines")
    assert refused.status_code == 401 and set(refused.json()) == {"error", "type"}
    form = await app_client.get("/v1/forms/fm_0123456789")
    assert form.status_code == 401
    page = await app_client.get("http://127.0.0.1:8765/connect/fm_0123456789")  # code only
    assert page.status_code == 200 and "connect.js" in page.text
    rebound = await app_client.get("/connect/fm_0123456789")  # not a name of the server's
    assert rebound.status_code == 403


async def test_the_connect_page_is_served_for_any_form_id(app_client: httpx.AsyncClient) -> None:
    answer = await app_client.get(
        "/connect/fm_0123456789", headers={"Authorization": f"Bearer {KEY}"}
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.headers["cache-control"] == "no-cache"
    assert '<script type="module" src="/static/connect.js">' in answer.text
    assert "style=" not in answer.text and "<script>" not in answer.text
