"""What the server's own routes (server/app.py) answer, as the models they build and send
through :func:`scratchpad.wire.wire` (``/openapi.json`` is generated from the same models): the
protocol's small answers, the server's identity, the pad list, a pad's cells and notebook; and
the path parameters every route module shares (:data:`PadPath`, :data:`CellIdPath` with the
rules of events.py's :data:`PadName` and :data:`CellId`; :data:`VaultPath`). Other routes'
answers live beside them (vault_routes.py, forms_routes.py, files_routes.py, login_routes.py,
pad_feed_routes.py, datavault_routes.py; the error body: guard.py; a credential submission's
events: connect/responses.py); a pad's cells, frames, feed
events and requests are scratchpad/events.py's.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field

from scratchpad.events import (
    CELL_ID_SCHEMA,
    PAD_NAME_RULE,
    PAD_NAME_SCHEMA,
    Cell,
    PadInfo,
)
from scratchpad.vault.names import NAME_RE, NAME_RULE

CellIdPath = Annotated[
    str,
    Path(
        description="A cell's id (1-64 letters, digits, '_' or '-').",
        json_schema_extra=CELL_ID_SCHEMA,
    ),
]
PadPath = Annotated[
    str,
    Path(
        description=PAD_NAME_RULE + " In a path, percent-encode it as one segment ('/' as %2F).",
        json_schema_extra=PAD_NAME_SCHEMA,
    ),
]

VaultPath = Annotated[
    str,
    Path(
        description=f"An engine or connection name: {NAME_RULE}.",
        json_schema_extra={"pattern": f"^{NAME_RE.pattern}$"},
    ),
]


class Ok(BaseModel):
    ok: Literal[True]


class CancelAnswer(BaseModel):
    ok: Literal[True]
    cancelled: bool = Field(
        description="False when there was nothing to cancel (the pad idle, or gone)."
    )


class ResetAnswer(BaseModel):
    ok: Literal[True]
    reset: bool = Field(description="False when there was no such pad (nothing was done).")


class RevertAnswer(BaseModel):
    ok: Literal[True]
    reverted: bool = Field(description="False when there was no such pad (nothing was done).")
    after_cell: int | None = Field(
        description="The cell after which the variables are now (null: nothing was done)."
    )


class InstallAnswer(BaseModel):
    result: str = Field(
        description="The installer's output; 'Install failed (exit N): ...' when it failed, "
        "'Install failed (refused): ...' for an option given as a package ('-r FILE')."
    )


class Confinement(BaseModel):
    """What confines pads on this server, mechanism by mechanism (see the README's trust
    model): each value says what holds, or what is missing and why."""

    landlock: str = Field(description="'ABI n', 'off' or 'unavailable'.")
    namespaces: str
    home: str = Field(description="What a pad sees of the Scratchpad home.")
    identity: str = Field(description="Who a pad's processes run as.")
    devices: str
    processes: str = Field(description="What keeps a kernel's descendants from outliving it.")
    limits: dict[str, str] = Field(
        description="Each limit of a pad (memory, processes, cpu, disk): its default and what "
        "holds it."
    )


class ServerInfo(BaseModel):
    pid: int
    version: str
    running_pads: list[str]
    sandbox: Literal["landlock", "off", "unavailable"]
    sandbox_abi: int | None = Field(None, description="The Landlock ABI, when sandboxed.")
    confinement: Confinement


class PadList(BaseModel):
    pads: list[PadInfo]


class PadCells(BaseModel):
    name: str
    cells: list[Cell]


class Notebook(BaseModel):
    """An nbformat 4 notebook."""

    model_config = ConfigDict(extra="allow")
    nbformat: Literal[4]
    nbformat_minor: int
    metadata: dict[str, Any]
    cells: list[dict[str, Any]]
