"""The shapes of what the web UI's routes say, for the OpenAPI document: slices of long
fields, workspace files, the forms a model asked for and the known engines' forms (a pad's
live feed and its info are scratchpad/events.py's).

Documentation only, as :mod:`scratchpad.server.schemas` (the tests check real answers against
these models).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

Absent = SkipJsonSchema[None]  # a key a form leaves out (never null): see FormPart


def _no_null_defaults(schema: dict[str, Any]) -> None:
    for value in schema.get("properties", {}).values():
        if "default" in value and value["default"] is None:
            del value["default"]


class FormPart(BaseModel):
    """A part of a form spec: its optional keys are left out when unset, never null."""

    model_config = ConfigDict(json_schema_extra=_no_null_defaults)


class TextSlice(BaseModel):
    """A slice of one field of a recorded cell (counted in characters)."""

    field: Literal["stdout", "stderr", "error", "result", "logs"]
    offset: int
    length: int = Field(description="Characters in `text` (at most 1 Mi).")
    total: int = Field(description="Characters in the whole field.")
    text: str


# -- workspace files --------------------------------------------------------------------------
class FileEntry(BaseModel):
    name: str
    path: str = Field(description="Relative to the workspace, '/'-separated.")
    type: Literal["dir", "file"]
    size: int | None = Field(description="Bytes (files only).")
    modified: str = Field(description="ISO 8601, UTC (e.g. 2025-01-31T12:00:00Z).")


class FileList(BaseModel):
    """One directory level: directories first, then files, by name."""

    pad: str
    path: str = Field(description="The directory listed ('' for the top).")
    entries: list[FileEntry]
    truncated: bool = Field(description="More entries were there than the 1000 listed.")


class FileWritten(BaseModel):
    path: str = Field(description="The file's clean path.")
    size: int = Field(description="Bytes written.")


class FileDeleted(BaseModel):
    deleted: str = Field(description="The clean path of what was deleted.")


# -- credential forms a model asked for, and the known engines' forms -----------------------
class FormOption(FormPart):
    value: str
    label: str


class FormField(FormPart):
    name: str
    label: str
    type: Literal["text", "password", "url", "select", "textarea", "boolean"]
    required: bool
    skipable: bool
    placeholder: str | Absent = None
    default: str | bool | Absent = Field(None, description="Never on a password field.")
    options: list[FormOption] | Absent = Field(None, description="A select field's choices.")
    help: str | Absent = None
    checkbox_label: str | Absent = None
    error: str | Absent = None
    warning: str | Absent = None
    status: str | Absent = None


class FormMethod(FormPart):
    """One way to authenticate, with its own fields."""

    id: str
    label: str
    description: str | Absent = None
    recommended: bool | Absent = None
    help_url: str | Absent = None
    fields: list[FormField] | Absent = None


class FormAction(FormPart):
    id: str
    label: str
    kind: Literal["primary", "secondary", "danger", "link"] | Absent = None


class FormSpec(FormPart):
    """A checked credential form (vault/formcheck.py): it never holds a value."""

    form_id: str
    engine: str
    title: str
    subtitle: str | Absent = None
    logo: str | Absent = Field(None, description="An icon name such as 'database'.")
    logo_color: str | Absent = None
    help_url: str | Absent = None
    form_warning: str | Absent = None
    form_error: str | Absent = None
    status_text: str | Absent = None
    is_probing: bool | Absent = Field(None, alias="_is_probing")
    is_success: bool | Absent = Field(None, alias="_is_success")
    selected_method: str | Absent = None
    auth_method: str | Absent = None
    fields: list[FormField] | Absent = None
    methods: list[FormMethod] | Absent = None
    actions: list[FormAction] | Absent = None


class FormConnection(BaseModel):
    """The connection a completed form was saved as: names, never values."""

    engine: str
    name: str
    variables: list[str] = Field(description="The DS_* variables pads get.")


class PendingFormInfo(BaseModel):
    """A form the model asked for over MCP, as the page that fills it in sees it."""

    form_id: str
    spec: FormSpec
    status: Literal["open", "completed", "declined", "expired"]
    connection: FormConnection | None = Field(description="Once completed.")


class WaitingForm(BaseModel):
    """An open form, as a list shows it (open it at ``/connect/{form_id}``)."""

    form_id: str
    title: str
    engine: str | None
    created_at: float = Field(description="When the model asked for it (epoch seconds).")
    expires_at: float = Field(description="When it expires unless filled in (epoch seconds).")


class WaitingForms(BaseModel):
    forms: list[WaitingForm] = Field(description="Newest first.")


class EngineInfo(BaseModel):
    engine: str
    label: str
    logo: str
    form: FormSpec = Field(description="A ready form for a new connection of this engine.")


class EngineList(BaseModel):
    engines: list[EngineInfo]
