"""The vault over HTTP: datasources (connections), per-pad grants (and every pad's at once),
the audit log.

No answer ever holds a secret value: records come back with the keep-sentinel in place of
each secret, listings hold names only. Writes go through the manager's vault, so running pads
get the change (see ``ScratchpadManager.refresh_secrets``). File work runs on worker threads.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

from fastapi import Body, FastAPI, Query
from pydantic import BaseModel, ConfigDict

from scratchpad.errors import ScratchpadError
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.guard import segment_name
from scratchpad.server.openapi import answers
from scratchpad.server.schemas import (
    AllGrants,
    AuditLog,
    Datasource,
    DatasourceCheck,
    DatasourceList,
    Grants,
    Ok,
    PadPath,
    VaultDescription,
    VaultPath,
)
from scratchpad.server.web_schemas import EngineList
from scratchpad.vault.audit import DEFAULT_LIMIT
from scratchpad.vault.engines import ENGINES, engine_form

log = logging.getLogger(__name__)
MAX_AUDIT_LIMIT = 10_000


class DatasourceBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    engine: str
    name: str | None = None  # none: the next free name of the engine
    fields: dict[str, Any]
    secure_keys: list[str] | None = None


class GrantBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    engine: str
    name: str


async def prime_vault(manager: ScratchpadManager) -> None:
    """Register every stored secret with the scrubber before the server answers anyone; a
    vault that cannot be opened is logged (pads then start without credentials)."""
    try:
        await asyncio.to_thread(manager.vault.prime)
    except (ScratchpadError, OSError) as exc:
        log.warning("the vault could not be opened: %s", exc)


def vault_routes(app: FastAPI, manager: ScratchpadManager) -> None:
    _datasource_routes(app, manager)
    _grant_routes(app, manager)
    _engine_routes(app)

    @app.get("/v1/vault/description", **answers(VaultDescription))
    async def description() -> dict[str, str]:
        """What the model is told of the credentials pads get (names only): for clients whose
        tools run elsewhere, such as `scratchpad mcp` over stdio."""
        return {"description": await asyncio.to_thread(manager.describe_credentials)}

    @app.get("/v1/vault/audit", **answers(AuditLog, 422))
    async def audit(
        limit: Annotated[int, Query(ge=0, le=MAX_AUDIT_LIMIT)] = DEFAULT_LIMIT,
    ) -> dict[str, Any]:
        return {"entries": await asyncio.to_thread(manager.vault.audit.read, limit)}


def _datasource_routes(app: FastAPI, manager: ScratchpadManager) -> None:
    @app.get("/v1/datasources", **answers(DatasourceList))
    async def datasources() -> dict[str, Any]:
        return {"datasources": await asyncio.to_thread(manager.vault.list)}

    @app.get("/v1/datasources/{engine}/{name}", **answers(Datasource, 400, 404))
    async def datasource(engine: VaultPath, name: VaultPath) -> dict[str, Any]:
        return await asyncio.to_thread(manager.vault.record, engine, name)

    @app.post("/v1/datasources/validate", **answers(DatasourceCheck, 422))
    async def validate(body: Annotated[dict[str, Any], Body()]) -> dict[str, Any]:
        """What is wrong with a save of ``body`` (nothing is saved)."""
        vault = manager.vault
        engine, name = body.get("engine"), body.get("name")
        if name is None and isinstance(engine, str):
            name = await asyncio.to_thread(_next_name_or_none, manager, engine)
        problems = await asyncio.to_thread(
            vault.validate, engine, name, body.get("fields"), body.get("secure_keys")
        )
        return {"ok": not problems, "problems": problems, "engine": engine, "name": name}

    @app.post("/v1/datasources", **answers(Datasource, 400, 422))
    async def save(body: DatasourceBody) -> dict[str, Any]:
        vault = manager.vault

        def store() -> dict[str, Any]:
            name = body.name or vault.next_name(body.engine)
            return vault.save(body.engine, name, body.fields, body.secure_keys)

        return await asyncio.to_thread(store)

    @app.delete("/v1/datasources/{engine}/{name}", **answers(Ok, 400, 404))
    async def delete(engine: VaultPath, name: VaultPath) -> dict[str, Any]:
        await asyncio.to_thread(manager.vault.delete, engine, name)
        return {"ok": True}


def _next_name_or_none(manager: ScratchpadManager, engine: str) -> str | None:
    try:
        return manager.vault.next_name(engine)
    except ScratchpadError:
        return None  # a bad engine: validate() says so


def _grant_routes(app: FastAPI, manager: ScratchpadManager) -> None:
    def answer(pad: str) -> dict[str, Any]:
        vault = manager.vault
        granted = [{"engine": e, "name": n} for e, n in vault.grants(pad)]
        return {"pad": pad, "default": vault.settings.vault_default_grant, "connections": granted}

    def every_pad() -> dict[str, Any]:
        vault = manager.vault
        names = sorted(set(manager.names_on_disk()) | set(manager.names()))
        pads = [
            {"pad": pad, "connections": [{"engine": e, "name": n} for e, n in granted]}
            for pad, granted in vault.grants_of(names).items()
        ]
        return {"default": vault.settings.vault_default_grant, "pads": pads}

    @app.get("/v1/grants", **answers(AllGrants))
    async def all_grants() -> dict[str, Any]:
        """What every pad gets: the Vault page's one request."""
        return await asyncio.to_thread(every_pad)

    @app.get("/v1/pads/{pad}/grants", **answers(Grants, 400))
    async def grants(pad: PadPath) -> dict[str, Any]:
        return await asyncio.to_thread(answer, segment_name(pad))

    @app.put("/v1/pads/{pad}/grants", **answers(Grants, 400, 404, 422))
    @app.post("/v1/pads/{pad}/grants", **answers(Grants, 400, 404, 422))
    async def grant(pad: PadPath, body: GrantBody) -> dict[str, Any]:
        pad = segment_name(pad)
        await asyncio.to_thread(manager.vault.grant, pad, body.engine, body.name)
        return await asyncio.to_thread(answer, pad)

    @app.delete("/v1/pads/{pad}/grants/{engine}/{name}", **answers(Grants, 400))
    async def revoke(pad: PadPath, engine: VaultPath, name: VaultPath) -> dict[str, Any]:
        pad = segment_name(pad)
        await asyncio.to_thread(manager.vault.revoke, pad, engine, name)
        return await asyncio.to_thread(answer, pad)


def _engine_routes(app: FastAPI) -> None:
    @app.get("/v1/datasources/engines", **answers(EngineList))
    async def engines() -> dict[str, Any]:
        """The known engines and a ready form for each (for a client's "add connection")."""
        listed = [
            {"engine": e.name, "label": e.label, "logo": e.logo, "form": engine_form(e.name)}
            for e in ENGINES.values()
        ]
        return {"engines": listed}
