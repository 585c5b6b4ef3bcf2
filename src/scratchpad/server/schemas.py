"""The shapes of what the server says, for its OpenAPI document (``/openapi.json``).

Documentation only: routes build their answers as plain data (a pad's cells can be many MB,
and validating them again on every call would slow the execute path), and the tests check
real answers against these models. Request bodies stay in the route modules; the pad-name rule
(:data:`PadName`, :data:`PadPath`) is shared with them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field

from scratchpad.padnames import MAX_NAME_CHARS
from scratchpad.runtime.cell import CELL_ID
from scratchpad.vault.names import NAME_RE, NAME_RULE

# The rule of padnames.py as JSON Schema: at most 128 characters (JSON Schema counts code
# points, as Python's len does), none of them a control character. Unpaired surrogates are
# refused too, but a pattern cannot say so without refusing every emoji in a UTF-16 regex.
PAD_NAME_PATTERN = r"^[^\u0000-\u001f\u007f-\u009f]+$"
PAD_NAME_RULE = (
    f"A pad name: any non-empty text of up to {MAX_NAME_CHARS} characters without control "
    "characters (e.g. 'main', 'my pad', 'data/analysis'); a bad one answers 400."
)
PAD_NAME_SCHEMA: dict[str, Any] = {
    "minLength": 1,
    "maxLength": MAX_NAME_CHARS,
    "pattern": PAD_NAME_PATTERN,
}
PadName = Annotated[str, Field(description=PAD_NAME_RULE, json_schema_extra=PAD_NAME_SCHEMA)]
CELL_ID_RULE = "A cell's id: 1-64 letters, digits, '_' or '-'; another answers 400."
CELL_ID_SCHEMA: dict[str, Any] = {
    "minLength": 1,
    "maxLength": 64,
    "pattern": f"^{CELL_ID.pattern}$",
}
CellId = Annotated[str, Field(description=CELL_ID_RULE, json_schema_extra=CELL_ID_SCHEMA)]
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


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer (server/guard.py ``error()``)."""

    error: str = Field(description="What went wrong and what to do (secrets scrubbed).")
    type: str = Field(
        description="The error class (InvalidInputError, PadNotFoundError, ...) or an HTTP-level "
        "refusal (NotFound, MethodNotAllowed, InternalError)."
    )


class Cell(BaseModel):
    """One executed cell (``Cell.to_dict()``). Errors in user code are data: ``status`` and a
    traceback in ``error``."""

    code: str
    stdout: str
    stderr: str
    error: str | None = Field(description="The traceback or reason when status is not ok.")
    description: str
    estimated_time: str
    logs: str = Field(description="Progress messages and notes from the runtime.")
    id: str
    status: Literal["ok", "error", "timeout", "cancelled", "killed"]
    result: str | None = Field(description="The text of the last expression, like Out[n].")
    outputs: list[dict[str, Any]] = Field(
        description="Rich outputs: mime bundles such as {'image/png': <base64>, 'text/plain': ...}."
    )
    duration_s: float
    number: int = Field(
        description="The cell's number in its pad (1-based, fixed when it was queued; the same in "
        "view, dump, a notebook's execution_count and its tracebacks' <cell N>). 0: a cell "
        "that stands for others (a note of folded history)."
    )
    result_data: dict[str, Any] = Field(
        description="The rich forms of the result (a mime bundle without text/plain, which is "
        "`result`), e.g. a DataFrame's {'text/html': ...}; {} when it has none."
    )
    outputs_at: list[list[int]] = Field(
        default_factory=list,
        description="Where each of `outputs` came among the text: [stdout, stderr], how many "
        "characters of each were written before it (one per output). [] when that is not "
        "known (an older record, outputs left out): show the outputs after the text.",
    )


class ProgressFrame(BaseModel):
    """``progress(msg)`` was called in the cell."""

    type: Literal["progress"]
    message: str


class OutputFrame(BaseModel):
    """A piece of stdout or stderr as it came (only with ``"stream_output": true``)."""

    type: Literal["output"]
    stream: Literal["stdout", "stderr"]
    text: str


class DisplayFrame(BaseModel):
    """A rich output as it was displayed (only with ``"stream_output": true``)."""

    type: Literal["display"]
    data: dict[str, Any] = Field(description="A mime bundle.")


class CellFrame(BaseModel):
    """The final frame: the cell (fitted under 64 KiB unless ``stream_output`` was asked;
    the whole cell is at ``GET /v1/pads/{name}/cells/{id}``)."""

    type: Literal["cell"]
    cell: Cell


class ErrorFrame(BaseModel):
    """The final frame of a stream the server could not finish."""

    type: Literal["error"]
    error: str
    error_type: str | None = Field(None, description="The error class, when there is one.")


EXECUTE_FRAMES = (ProgressFrame, OutputFrame, DisplayFrame, CellFrame, ErrorFrame)


class Ok(BaseModel):
    ok: Literal[True]


class LoginLink(BaseModel):
    url: str = Field(description="A one-time link: opening it logs a browser in.")
    expires_at: float = Field(description="Epoch seconds: unused after that, it is void.")


class BrowserSession(BaseModel):
    """What a login link's token gives: a session for one browser tab."""

    session: str = Field(description="Send it as the X-Scratchpad-Session header.")
    scope: str = Field(description="'all', or 'form:<form_id>' (that form only).")
    next: str = Field(description="The page the link opens (a path here).")
    expires_at: float = Field(description="Epoch seconds: the session ends then, or at logout.")


class SignedUrl(BaseModel):
    url: str = Field(description="The path with its signature (`sig`): GET it with no header.")
    expires_at: float = Field(description="Epoch seconds: the URL is void after that.")


class CancelAnswer(BaseModel):
    ok: Literal[True]
    cancelled: bool = Field(
        description="False when there was nothing to cancel (the pad idle, or gone)."
    )


class ResetAnswer(BaseModel):
    ok: Literal[True]
    reset: bool = Field(description="False when there was no such pad (nothing was done).")


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


class RunningBrief(BaseModel):
    """The cell a busy pad runs."""

    id: str
    description: str


class PadInfo(BaseModel):
    """One pad's line of the pad list (runtime/padinfo.py); times are epoch seconds."""

    name: str
    status: Literal["idle", "busy", "asleep", "stopped", "dead"] = Field(
        description="busy: a cell runs; asleep: no kernel (it went to sleep when idle, or the "
        "server restarted; its next use starts one); stopped: no kernel (closed, or no cells "
        "yet); dead: its kernel died and was not restarted yet (the next cell restarts it; "
        "`cause` says how it died). Take a status you do not know as stopped: more may come."
    )
    cells: int = Field(description="Recorded cells.")
    queued: int = Field(description="Cells waiting behind the running one.")
    busy_since: float | None = Field(description="When the running cell started.")
    running: RunningBrief | None = Field(description="The running cell (busy, dead).")
    memory_bytes: int | None = Field(
        description="Resident memory of the kernel's processes (idle and busy pads)."
    )
    last_activity: float | None = Field(description="When a cell last started or ended.")
    cause: str | None = Field(description="How the kernel died (dead pads only).")


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


# -- the vault (no answer holds a secret value) ---------------------------------------------
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


# -- credential submissions (connect/flow.py) ---------------------------------------------
class SubmissionInfo(BaseModel):
    """How a submission stands: names, never values."""

    id: str
    form_id: str
    conversation_id: str | None
    engine: str
    method: str | None
    fields: list[str]
    skipped: list[str]
    connection_name: str | None
    status: Literal["staged", "probing", "success", "needs_input", "retry", "failed"]
    created_at: float
    outcome: dict[str, Any]


class ResponseError(BaseModel):
    code: str
    message: str


class ResponseObject(BaseModel):
    """The submission as a Responses API ``response``; its status says how it ended."""

    model_config = ConfigDict(extra="allow")
    id: str
    object: Literal["response"]
    status: Literal["in_progress", "success", "needs_input", "retry", "failed"]
    submission_id: str
    form_id: str
    output_text: str | None = None
    connection: dict[str, Any] | None = Field(None, description="success: engine, name, variables.")
    error: str | ResponseError | None = None
    follow_up: str | None = None
    reason: str | None = None
    fields: list[str] | None = None


class ResponseCreated(BaseModel):
    type: Literal["response.created"]
    sequence_number: int
    response: ResponseObject


class ResponseTextDelta(BaseModel):
    """Chat text; fenced ``data-vault-form-patch`` blocks in it are patches of the form."""

    type: Literal["response.output_text.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str


class ResponseInProgress(BaseModel):
    """What the probe does in its pad."""

    type: Literal["response.in_progress"]
    sequence_number: int
    response: ResponseObject
    thought_role: Literal["scratchpad.start", "scratchpad.result", "scratchpad.end"]
    thought: dict[str, Any]


class ResponseCompleted(BaseModel):
    """The last event of a probe that ran: ``response.status`` says how it ended."""

    type: Literal["response.completed"]
    sequence_number: int
    response: ResponseObject


class ResponseFailed(BaseModel):
    """The last event when the probe could not run (``response.error`` says why)."""

    type: Literal["response.failed"]
    sequence_number: int
    response: ResponseObject


SUBMISSION_EVENTS = (
    ResponseCreated,
    ResponseTextDelta,
    ResponseInProgress,
    ResponseCompleted,
    ResponseFailed,
    ErrorFrame,
)
