"""The shapes of what the web UI's routes say, for the OpenAPI document: a pad's live feed
(runtime/watch.py's events), one pad's info, slices of long fields, workspace files, the
forms a model asked for and the known engines' forms.

Documentation only, as :mod:`scratchpad.server.schemas` (the tests check real answers against
these models).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from scratchpad.server.schemas import Cell, ErrorFrame, PadInfo

Absent = SkipJsonSchema[None]  # a key a form leaves out (never null): see FormPart


def _no_null_defaults(schema: dict[str, Any]) -> None:
    for value in schema.get("properties", {}).values():
        if "default" in value and value["default"] is None:
            del value["default"]


class FormPart(BaseModel):
    """A part of a form spec: its optional keys are left out when unset, never null."""

    model_config = ConfigDict(json_schema_extra=_no_null_defaults)


# -- a pad's live feed (GET /v1/pads/{name}/events) ------------------------------------------
class WatchedPad(PadInfo):
    """A pad as its feed tells it: the pad list's line, or a pad not there (yet, or any more)."""

    status: Literal["idle", "busy", "asleep", "stopped", "dead", "new", "removed"] = Field(  # type: ignore[assignment]
        description="As in the pad list; new: no such pad yet (the feed tells when it starts); "
        "removed: the pad and its files were just removed."
    )


class CellBrief(BaseModel):
    """A cell not recorded yet (its code and description scrubbed, cut to 64 KiB: head and
    tail)."""

    id: str
    number: int = Field(description="The cell's number in its pad (1-based, fixed when queued).")
    code: str
    description: str


class RunningState(CellBrief):
    """The running cell as its watchers were told so far."""

    started_at: float = Field(description="Epoch seconds.")
    stdout: str = Field(description="The output so far: head and tail of 256 KiB per stream.")
    stderr: str
    displays: list[dict[str, Any]] = Field(description="The latest displays (mime bundles).")
    displays_dropped: int = Field(description="Earlier displays no longer kept.")
    progress: str | None = Field(description="The last progress message.")


class FeedSnapshot(BaseModel):
    """The first frame: how the pad stands (what came before the frames that follow)."""

    type: Literal["snapshot"]
    pad: WatchedPad
    running: RunningState | None
    queued: list[CellBrief] = Field(description="Cells waiting for their turn, in order.")
    cells: int = Field(description="Recorded cells (read them at GET /v1/pads/{name}).")


class FeedQueued(BaseModel):
    """A cell was submitted (by any client) and waits for its turn."""

    type: Literal["queued"]
    cell: CellBrief


class FeedStarted(BaseModel):
    """The kernel entered a cell."""

    type: Literal["started"]
    id: str
    number: int = Field(description="The cell's number in its pad (1-based).")
    started_at: float


class FeedOutput(BaseModel):
    """A piece (at most 64 Ki characters) of what the running cell printed."""

    type: Literal["output"]
    id: str
    stream: Literal["stdout", "stderr"]
    text: str


class FeedDisplay(BaseModel):
    """A rich output the running cell displayed."""

    type: Literal["display"]
    id: str
    data: dict[str, Any] = Field(description="A mime bundle.")


class FeedProgress(BaseModel):
    """``progress(msg)`` was called in the running cell."""

    type: Literal["progress"]
    id: str
    message: str


class FeedCell(BaseModel):
    """A cell ended: recorded, or cancelled before its turn. Fitted under 1 MiB: long fields
    keep head and tail (read them whole at GET /v1/pads/{name}/cells/{id}/text)."""

    type: Literal["cell"]
    cell: Cell


class FeedStatus(BaseModel):
    """The pad started, restarted, was reset, closed or removed, or its kernel died."""

    type: Literal["status"]
    pad: WatchedPad


class FeedOverflow(BaseModel):
    """The last frame for a client that fell too far behind: reconnect (a fresh snapshot)."""

    type: Literal["overflow"]


FEED_FRAMES = (
    FeedSnapshot,
    FeedQueued,
    FeedStarted,
    FeedOutput,
    FeedDisplay,
    FeedProgress,
    FeedCell,
    FeedStatus,
    FeedOverflow,
    ErrorFrame,
)


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
