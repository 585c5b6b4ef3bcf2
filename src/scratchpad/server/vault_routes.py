"""The vault over HTTP: datasources (connections), per-pad grants (and every pad's at once),
the audit log, the known engines; and the models of what each route answers (built by the
route, sent through :func:`scratchpad.wire.wire`, documented in ``/openapi.json``).

No answer ever holds a secret value: records come back with the keep-sentinel in place of
each secret, listings hold names only. Writes go through the manager's vault, so running pads
get the change (see ``ScratchpadManager.refresh_secrets``). File work runs on worker threads.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any, Literal

from fastapi import Body, FastAPI, Query
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scratchpad.errors import ScratchpadError
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.forms_routes import FormSpec
from scratchpad.server.guard import segment_name
from scratchpad.server.openapi import answers
from scratchpad.server.schemas import Ok, PadPath, VaultPath
from scratchpad.vault.audit import DEFAULT_LIMIT
from scratchpad.vault.engines import ENGINES, engine_form
from scratchpad.wire import made, wire

log = logging.getLogger(__name__)
MAX_AUDIT_LIMIT = 10_000


# -- what the routes answer (no answer holds a secret value) -----------------------------
class DatasourceSummary(BaseModel):
    engine: str
    name: str
    created_at: str
    updated_at: str
    fields: list[str]
    secure_keys: list[str]
    env: list[str] = Field(description="The DS_* variables pads get.")


class UnreadableDatasource(BaseModel):
    """A stored record that cannot be read (corrupt, or another key)."""

    engine: str
    name: str
    error: str
    file: str


class DatasourceList(BaseModel):
    datasources: list[DatasourceSummary | UnreadableDatasource]


class Datasource(BaseModel):
    engine: str
    name: str
    created_at: str
    updated_at: str
    fields: dict[str, str] = Field(
        description="Values; a secret one is '********' (send it back to keep it)."
    )
    secure_keys: list[str]


class DatasourceCheck(BaseModel):
    ok: bool
    problems: list[str]
    engine: Any = Field(description="The engine as sent.")
    name: Any = Field(description="The name as sent, or the next free one.")


class Connection(BaseModel):
    engine: str
    name: str


class Grants(BaseModel):
    pad: str
    default: Literal["all", "none"]
    connections: list[Connection]


class PadGrants(BaseModel):
    pad: str
    connections: list[Connection]


class AllGrants(BaseModel):
    """What every pad gets, in one answer (the Vault page's)."""

    default: Literal["all", "none"]
    pads: list[PadGrants] = Field(description="Every pad on disk or running, by name.")


class AuditEntry(BaseModel):
    at: str
    event: Literal["inject", "rotate", "save", "delete", "grant", "revoke", "probe"]
    pad: str | None = None
    engine: str
    name: str


class AuditLog(BaseModel):
    entries: list[AuditEntry]


class VaultDescription(BaseModel):
    description: str = Field(description="What the model is told of the credentials pads get.")


class EngineInfo(BaseModel):
    engine: str
    label: str
    logo: str
    form: FormSpec = Field(description="A ready form for a new connection of this engine.")


class EngineList(BaseModel):
    engines: list[EngineInfo]


# -- what they take ---------------------------------------------------------------------------
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
    async def description() -> dict[str, Any]:
        """What the model is told of the credentials pads get (names only): for clients whose
        tools run elsewhere, such as `scratchpad mcp` over stdio."""
        text = await asyncio.to_thread(manager.describe_credentials)
        return wire(VaultDescription(description=text))

    @app.get("/v1/vault/audit", **answers(AuditLog, 422))
    async def audit(
        limit: Annotated[int, Query(ge=0, le=MAX_AUDIT_LIMIT)] = DEFAULT_LIMIT,
    ) -> dict[str, Any]:
        lines = await asyncio.to_thread(manager.vault.audit.read, limit)
        return wire(AuditLog(entries=_entries(lines)))


def _entries(lines: list[dict[str, Any]]) -> list[AuditEntry]:
    """The audit log's lines that are entries (one written otherwise is skipped, as a line
    that does not parse is)."""
    entries = []
    for line in lines:
        try:
            entries.append(AuditEntry.model_validate(line))
        except ValidationError:
            log.warning("an audit line that is not an entry was skipped")
    return entries


def _datasource_routes(app: FastAPI, manager: ScratchpadManager) -> None:
    @app.get("/v1/datasources", **answers(DatasourceList))
    async def datasources() -> dict[str, Any]:
        listed = await asyncio.to_thread(manager.vault.list)
        return wire(DatasourceList.model_validate({"datasources": listed}))

    @app.get("/v1/datasources/{engine}/{name}", **answers(Datasource, 400, 404))
    async def datasource(engine: VaultPath, name: VaultPath) -> dict[str, Any]:
        record = await asyncio.to_thread(manager.vault.record, engine, name)
        return wire(Datasource.model_validate(record))

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
        return wire(DatasourceCheck(ok=not problems, problems=problems, engine=engine, name=name))

    @app.post("/v1/datasources", **answers(Datasource, 400, 422))
    async def save(body: DatasourceBody) -> dict[str, Any]:
        vault = manager.vault

        def store() -> dict[str, Any]:
            name = body.name or vault.next_name(body.engine)
            return vault.save(body.engine, name, body.fields, body.secure_keys)

        return wire(Datasource.model_validate(await asyncio.to_thread(store)))

    @app.delete("/v1/datasources/{engine}/{name}", **answers(Ok, 400, 404))
    async def delete(engine: VaultPath, name: VaultPath) -> dict[str, Any]:
        await asyncio.to_thread(manager.vault.delete, engine, name)
        return wire(Ok(ok=True))


def _next_name_or_none(manager: ScratchpadManager, engine: str) -> str | None:
    try:
        return manager.vault.next_name(engine)
    except ScratchpadError:
        return None  # a bad engine: validate() says so


def _grant_routes(app: FastAPI, manager: ScratchpadManager) -> None:
    def answer(pad: str) -> dict[str, Any]:
        vault = manager.vault
        granted = _connections(vault.grants(pad))
        default = vault.settings.vault_default_grant
        return wire(Grants(pad=pad, default=default, connections=granted))

    def every_pad() -> dict[str, Any]:
        vault = manager.vault
        names = sorted(set(manager.names_on_disk()) | set(manager.names()))
        pads = [
            PadGrants(pad=pad, connections=_connections(granted))
            for pad, granted in vault.grants_of(names).items()
        ]
        return wire(AllGrants(default=vault.settings.vault_default_grant, pads=pads))

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


def _connections(pairs: list[tuple[str, str]]) -> list[Connection]:
    return [Connection(engine=engine, name=name) for engine, name in pairs]


def _engine_routes(app: FastAPI) -> None:
    @app.get("/v1/datasources/engines", **answers(EngineList))
    async def engines() -> dict[str, Any]:
        """The known engines and a ready form for each (for a client's "add connection")."""
        listed = [  # each form as vault/formcheck.py checked it (its keys in its order)
            made(
                EngineInfo,
                {"engine": e.name, "label": e.label, "logo": e.logo, "form": engine_form(e.name)},
            )
            for e in ENGINES.values()
        ]
        return wire(EngineList(engines=listed))
