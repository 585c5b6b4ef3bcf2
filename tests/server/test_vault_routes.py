"""The vault over HTTP (in-process): datasources, validation, grants, audit — and no answer
ever holds a secret value."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from scratchpad.config import Settings
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.app import create_app
from scratchpad.vault import KEEP, Vault

KEY = "test-key"
SECRET = "http-secret-value-9"


@pytest.fixture
async def vault_client(
    workspace: Path, settings: Settings
) -> AsyncIterator[tuple[httpx.AsyncClient, Vault]]:
    vault = Vault(settings.with_home(workspace / ".scratchpad"), keyring=None)
    manager = ScratchpadManager(workspace=workspace, settings=settings, vault=vault)
    app = create_app(manager, api_key=KEY)
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        yield c, vault
    await manager.close_all()


async def test_datasource_crud_never_returns_a_secret(
    vault_client: tuple[httpx.AsyncClient, Vault],
) -> None:
    client, vault = vault_client
    body = {"engine": "postgres", "fields": {"host": "db", "password": SECRET}}
    saved = await client.post("/v1/datasources", json=body)
    assert saved.status_code == 200, saved.text
    assert saved.json()["name"] == "1" and saved.json()["fields"]["password"] == KEEP
    listed = await client.get("/v1/datasources")
    (entry,) = listed.json()["datasources"]
    assert entry["env"] == ["DS_POSTGRES_1__HOST", "DS_POSTGRES_1__PASSWORD"]
    one = await client.get("/v1/datasources/postgres/1")
    assert one.json()["fields"] == {"host": "db", "password": KEEP}
    edit = {"engine": "postgres", "name": "1", "fields": {"host": "db2", "password": KEEP}}
    assert (await client.post("/v1/datasources", json=edit)).status_code == 200
    assert vault.load("postgres", "1") == {"host": "db2", "password": SECRET}
    audit = await client.get("/v1/vault/audit", params={"limit": 5})
    assert [e["event"] for e in audit.json()["entries"]] == ["save", "save"]
    for answer in (saved, listed, one, audit):
        assert SECRET not in answer.text
    assert (await client.delete("/v1/datasources/postgres/1")).json() == {"ok": True}
    gone = await client.get("/v1/datasources/postgres/1")
    assert gone.status_code == 404 and gone.json()["type"] == "VaultNotFoundError"


async def test_validate_says_what_is_wrong_without_saving(
    vault_client: tuple[httpx.AsyncClient, Vault],
) -> None:
    client, vault = vault_client
    bad = {"engine": "pg sql", "fields": {"password": "abc"}}
    answer = (await client.post("/v1/datasources/validate", json=bad)).json()
    assert not answer["ok"] and "invalid engine" in answer["problems"][0]
    short = {"engine": "pg", "fields": {"password": "abc"}}
    answer = (await client.post("/v1/datasources/validate", json=short)).json()
    assert answer["name"] == "1" and "at least 6" in answer["problems"][0]
    good = {"engine": "pg", "fields": {"password": SECRET}}
    assert (await client.post("/v1/datasources/validate", json=good)).json()["ok"]
    assert vault.connections() == []
    refused = await client.post("/v1/datasources", json=short)
    assert refused.status_code == 400 and refused.json()["type"] == "InvalidInputError"


async def test_grants(vault_client: tuple[httpx.AsyncClient, Vault]) -> None:
    client, vault = vault_client
    vault.save("postgres", "prod", {"password": SECRET})
    pad = "data%2Fteam"  # a pad name with '/'
    start = (await client.get(f"/v1/pads/{pad}/grants")).json()
    assert start == {
        "pad": "data/team",
        "default": "all",
        "connections": [{"engine": "postgres", "name": "prod"}],
    }
    revoked = await client.delete(f"/v1/pads/{pad}/grants/postgres/prod")
    assert revoked.json()["connections"] == []
    body = {"engine": "postgres", "name": "prod"}
    granted = await client.put(f"/v1/pads/{pad}/grants", json=body)
    assert granted.json()["connections"] == [body]
    missing = await client.post(f"/v1/pads/{pad}/grants", json={"engine": "x", "name": "y"})
    assert missing.status_code == 404
    assert vault.grants("data/team") == [("postgres", "prod")]


async def test_every_pads_grants_in_one_answer(
    vault_client: tuple[httpx.AsyncClient, Vault],
) -> None:
    client, vault = vault_client
    vault.save("postgres", "prod", {"password": SECRET})
    for pad in ("a", "b/c"):
        assert (await client.post("/scratchpad/start", json={"name": pad})).status_code == 200
    await client.delete("/v1/pads/b%2Fc/grants/postgres/prod")
    answer = (await client.get("/v1/grants")).json()
    prod = [{"engine": "postgres", "name": "prod"}]
    assert answer == {
        "default": "all",
        "pads": [{"pad": "a", "connections": prod}, {"pad": "b/c", "connections": []}],
    }


async def test_the_vault_routes_need_the_key(
    vault_client: tuple[httpx.AsyncClient, Vault],
) -> None:
    client, _ = vault_client
    refused = await client.get("/v1/datasources", headers={"Authorization": "Bearer wrong"})
    assert refused.status_code == 401


async def test_mcp_tool_list_names_the_vaults_variables_as_of_now(
    workspace: Path, settings: Settings
) -> None:
    from mcp import Client

    from scratchpad.server.mcp_server import create_mcp_server

    vault = Vault(settings.with_home(workspace / ".scratchpad"), keyring=None)
    async with (
        ScratchpadManager(workspace=workspace, settings=settings, vault=vault) as manager,
        Client(create_mcp_server(manager)) as client,
    ):
        before = (await client.list_tools()).tools[0].description or ""
        vault.save("postgres", "prod", {"password": SECRET})
        after = (await client.list_tools()).tools[0].description or ""
    assert "DS_POSTGRES_PROD__PASSWORD" not in before
    assert "DS_POSTGRES_PROD__PASSWORD (postgres/prod)" in after and SECRET not in after


def test_pads_on_a_server_describe_its_credentials_by_name(tmp_path: Path) -> None:
    """`scratchpad mcp` and `chat` run their tools against a server: the model must still be
    told which variables its pads get (names, never values)."""
    from tests.server_helpers import running_server

    home, key = tmp_path / "served", "describe-key"
    with running_server(home, tmp_path, key) as (url, _):
        saved = httpx.post(
            f"{url}/v1/datasources",
            headers={"Authorization": f"Bearer {key}"},
            json={"engine": "postgres", "name": "prod", "fields": {"password": "s3cret-pw-1"}},
        )
        assert saved.status_code == 200, saved.text
        settings = Settings(
            home=tmp_path / "client", backend="remote", remote_url=url, remote_api_key=key
        )
        described = ScratchpadManager(settings=settings).describe_credentials()
    assert "DS_POSTGRES_PROD__PASSWORD" in described
    assert "s3cret-pw-1" not in described
    gone = Settings(home=tmp_path / "client", backend="remote", remote_url=url, remote_api_key=key)
    assert ScratchpadManager(settings=gone).describe_credentials() == ""  # no server: nothing


async def test_an_audit_line_that_is_not_an_entry_is_skipped(
    vault_client: tuple[httpx.AsyncClient, Vault],
) -> None:
    client, vault = vault_client
    vault.audit.append("save", "postgres", "1")
    with vault.audit.path.open("a", encoding="utf-8") as log:
        log.write('{"what": "not an entry"}\n[1, 2]\n{"at": "x", "event": "unknown"}\n')
    vault.audit.append("grant", "postgres", "1", pad="main")
    answer = await client.get("/v1/vault/audit")
    assert answer.status_code == 200, answer.text
    assert [e["event"] for e in answer.json()["entries"]] == ["save", "grant"]
