"""The typed events of a pad, one set for every edge: the cell as it is recorded, the frames
of ``execute-stream``, the pad feed's events, the requests of the remote-backend protocol,
and a detached cell: as it stands, and its journal's numbered frames. The runtime emits
them (runtime/watch.py), the server sends them (server/frames.py, server/pad_feed_routes.py,
server/cells_routes.py), and ``/openapi.json`` is generated from them (server/openapi.py).

Pydantic models, frozen, each event told apart by its ``type``. On the hot paths (a frame per
output piece, a recorded cell of many MB) they are built with ``model_construct`` from values
the runtime already typed and cleaned, and turned into JSON-ready data by :func:`wire`, which
keeps the bytes clients have always read: keys in declaration order, a field left unset
whose default is None left out (never null), every other value passed through as it is (no
coercion: an ``int`` duration stays ``1``). The tests validate what :func:`wire` gives
against these models.

The runtime keeps its dataclasses (runtime/cell.py: ``Cell``, ``OutputEvent`` ...); they
become events here only, in :func:`cell_of`, :func:`from_item` and :func:`frame_of`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union, cast, get_args

from pydantic import BaseModel, ConfigDict, Field, create_model

from scratchpad.padnames import MAX_NAME_CHARS
from scratchpad.runtime import cell as runtime
from scratchpad.runtime.cell import CELL_ID
from scratchpad.wire import made as _made
from scratchpad.wire import wire as wire  # the events' way onto the wire (scratchpad/wire.py)

# -- names and ids, as JSON Schema ----------------------------------------------------------
# The rule of padnames.py: at most 128 characters (JSON Schema counts code points, as Python's
# len does), none of them a control character. Unpaired surrogates are refused too, but a
# pattern cannot say so without refusing every emoji in a UTF-16 regex.
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


def _type_always_sent(schema: dict[str, Any]) -> None:
    """An event's ``type`` is always on the wire: documented as required, without the
    default that only spares its constructors from repeating it."""
    kind = schema.get("properties", {}).get("type")
    if kind is not None and "default" in kind:
        del kind["default"]
        schema["required"] = ["type", *schema.get("required", [])]


class Model(BaseModel):
    """An event or a part of one: frozen (a journal and many subscribers share it)."""

    model_config = ConfigDict(frozen=True, json_schema_extra=_type_always_sent)


# -- the cell ---------------------------------------------------------------------------------
class Cell(Model):
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


class CellBrief(Model):
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


# -- a pad, as the pad list and the feed tell it -------------------------------------------
class RunningBrief(Model):
    """The cell a busy pad runs."""

    id: str
    description: str


class PadInfo(Model):
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


class WatchedPad(PadInfo):
    """A pad as its feed tells it: the pad list's line, or a pad not there (yet, or any more)."""

    status: Literal["idle", "busy", "asleep", "stopped", "dead", "new", "removed"] = Field(  # type: ignore[assignment]
        description="As in the pad list; new: no such pad yet (the feed tells when it starts); "
        "removed: the pad and its files were just removed."
    )


class WatchState(Model):
    """What runs and what waits in a pad, as far as its watch's events told so far (the
    feed's snapshot holds it)."""

    running: RunningState | None
    queued: list[CellBrief]


# -- execute-stream frames ------------------------------------------------------------------
class ProgressFrame(Model):
    """``progress(msg)`` was called in the cell."""

    type: Literal["progress"] = "progress"
    message: str


class OutputFrame(Model):
    """A piece of stdout or stderr as it came (only with ``"stream_output": true``)."""

    type: Literal["output"] = "output"
    stream: Literal["stdout", "stderr"]
    text: str


class DisplayFrame(Model):
    """A rich output as it was displayed (only with ``"stream_output": true``)."""

    type: Literal["display"] = "display"
    data: dict[str, Any] = Field(description="A mime bundle.")


class CellFrame(Model):
    """The final frame: the cell (fitted under 64 KiB unless ``stream_output`` was asked;
    the whole cell is at ``GET /v1/pads/{name}/cells/{id}``)."""

    type: Literal["cell"] = "cell"
    cell: Cell


class ErrorFrame(Model):
    """The final frame of a stream the server could not finish."""

    type: Literal["error"] = "error"
    error: str
    error_type: str | None = Field(None, description="The error class, when there is one.")


ExecuteFrame = Annotated[
    Union[ProgressFrame, OutputFrame, DisplayFrame, CellFrame, ErrorFrame],  # noqa: UP007
    Field(discriminator="type"),
]


# -- the pad feed (GET /v1/pads/{name}/events) ----------------------------------------------
class FeedSnapshot(Model):
    """The first frame: how the pad stands (what came before the frames that follow)."""

    type: Literal["snapshot"] = "snapshot"
    pad: WatchedPad
    running: RunningState | None
    queued: list[CellBrief] = Field(description="Cells waiting for their turn, in order.")
    cells: int = Field(description="Recorded cells (read them at GET /v1/pads/{name}).")


class FeedQueued(Model):
    """A cell was submitted (by any client) and waits for its turn."""

    type: Literal["queued"] = "queued"
    cell: CellBrief


class FeedStarted(Model):
    """The kernel entered a cell."""

    type: Literal["started"] = "started"
    id: str
    number: int = Field(description="The cell's number in its pad (1-based).")
    started_at: float


class FeedOutput(Model):
    """A piece (at most 64 Ki characters) of what the running cell printed."""

    type: Literal["output"] = "output"
    id: str
    stream: Literal["stdout", "stderr"]
    text: str


class FeedDisplay(Model):
    """A rich output the running cell displayed."""

    type: Literal["display"] = "display"
    id: str
    data: dict[str, Any] = Field(description="A mime bundle.")


class FeedProgress(Model):
    """``progress(msg)`` was called in the running cell."""

    type: Literal["progress"] = "progress"
    id: str
    message: str


class FeedCell(Model):
    """A cell ended: recorded, or cancelled before its turn. Fitted under 1 MiB: long fields
    keep head and tail (read them whole at GET /v1/pads/{name}/cells/{id}/text)."""

    type: Literal["cell"] = "cell"
    cell: Cell


class FeedStatus(Model):
    """The pad started, restarted, was reset, closed or removed, or its kernel died."""

    type: Literal["status"] = "status"
    pad: WatchedPad
    gen: int | None = Field(
        None,
        description="The pad's kernel generation now (one more after each kernel start: a "
        "new kernel, whose variables came back from a checkpoint at best).",
    )


class FeedOverflow(Model):
    """The last frame for a client that fell too far behind: reconnect (a fresh snapshot)."""

    type: Literal["overflow"] = "overflow"


# What a pad's watch publishes (runtime/watch.py), and what its feed sends (the snapshot
# first; an error frame if the server fails mid-stream).
WatchEvent = FeedQueued | FeedStarted | FeedOutput | FeedDisplay | FeedProgress | FeedCell
PadEvent = WatchEvent | FeedStatus | FeedOverflow
FeedFrame = Annotated[
    Union[  # noqa: UP007
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
    ],
    Field(discriminator="type"),
]


# -- a detached cell as it stands (GET /v1/pads/{name}/cells/{id}, its resync frame) -------
GEN_RULE = "The pad's kernel generation it runs (ran) in; null: not known (a record read back)."
LAST_SEQ_RULE = "The number of its latest event (resume its events after it); null: no journal."


class QueuedCell(CellBrief):
    """A cell waiting for its turn."""

    status: Literal["queued"]
    gen: int | None = Field(description=GEN_RULE)
    last_seq: int | None = Field(description=LAST_SEQ_RULE)


class RunningCell(RunningState):
    """The running cell, with what it printed so far."""

    status: Literal["running"]
    gen: int | None = Field(description=GEN_RULE)
    last_seq: int | None = Field(description=LAST_SEQ_RULE)


class RecordedCell(Cell):
    """A cell that ended: the whole record (its ``status`` is the recorded one)."""

    gen: int | None = Field(description=GEN_RULE)
    last_seq: int | None = Field(description=LAST_SEQ_RULE)


class RecordedBrief(Model):
    """A cell that ended lately, in brief (read it whole at GET /v1/pads/{name}/cells/{id})."""

    id: str
    number: int
    status: Literal["ok", "error", "timeout", "cancelled", "killed"]
    description: str
    gen: int | None = Field(description=GEN_RULE)
    last_seq: int | None = Field(description=LAST_SEQ_RULE)
    ended_at: float = Field(description="When it ended (epoch seconds).")


# How a cell stands, told apart by its ``status``: queued, running, or a recorded status.
CellStanding = Annotated[
    Union[QueuedCell, RunningCell, RecordedCell],  # noqa: UP007
    Field(discriminator="status"),
]
ListedCell = Annotated[
    Union[QueuedCell, RunningCell, RecordedBrief],  # noqa: UP007
    Field(discriminator="status"),
]


class CellList(Model):
    """A pad's running, queued and recently finished cells (GET /v1/pads/{name}/cells)."""

    cells: list[ListedCell]


class Resync(Model):
    """The cell as it stands, for a reader that cannot be replayed what it missed (its
    frames left the journal's ring, or the server restarted): queued with its brief, running
    with the output so far, or recorded whole. Frames after it continue from there."""

    type: Literal["resync"] = "resync"
    cell: CellStanding


# The events a cell's journal holds (runtime/journal.py); a stream of them sends each with
# its number and generation (:data:`JournalFrame`, built by :func:`numbered`).
CellEvent = Annotated[
    Union[FeedQueued, FeedStarted, FeedOutput, FeedDisplay, FeedProgress, FeedCell, Resync],  # noqa: UP007
    Field(discriminator="type"),
]


# -- requests of the remote-backend protocol ------------------------------------------------
class PadRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)  # clients elsewhere may send more
    name: PadName


class ForkRequest(BaseModel):
    """``POST /v1/pads/{name}/fork``: the new pad's name (it must not exist)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    to: PadName


class LimitsRequest(BaseModel):
    """A pad's own limits (our extension; see the README's trust model): each replaces the
    server's default; 0 means none of that kind."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)  # 1.5, true, "100": no
    memory_mb: int | None = Field(None, ge=0, description="64 and up; 0: no memory limit")
    processes: int | None = Field(None, ge=0, description="32 and up; 0: no process limit")
    cpu_weight: int | None = Field(None, ge=1, le=10000)
    disk_mb: int | None = Field(None, ge=0, description="16 and up; 0: no disk limit")


# A pad's placement on a Ray cluster (our extension): documented here, checked by the core
# (runtime/placement.py check_resources) so that HTTP, MCP, the CLI and Python say the same.
_AMOUNT: dict[str, Any] = {"type": "number", "minimum": 0}
RESOURCES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "cpus": {**_AMOUNT, "description": "CPUs the pad's actor holds (its CPU share)."},
        "gpus": {**_AMOUNT, "description": "GPUs: the pad runs on a node that has them."},
        "memory_mb": {**_AMOUNT, "description": "Memory in MiB, held and the pad's limit."},
        "custom": {
            "type": "object",
            "additionalProperties": _AMOUNT,
            "description": 'Custom Ray resources by name, e.g. {"gpu_node": 1}.',
        },
    },
    "additionalProperties": False,
}
RESOURCES_RULE = (
    "What the pad asks its Ray cluster for, from its next start on (a server started with "
    "SCRATCHPAD_BACKEND=ray; any other answers 400); unset amounts take the server's "
    "defaults. A bad one answers 400 saying what is wrong."
)
# Any JSON is taken and checked by the core: its refusal names the fault (a 400).
Resources = Annotated[Any, Field(description=RESOURCES_RULE, json_schema_extra=RESOURCES_SCHEMA)]


class StartRequest(PadRequest):
    coding_provider: str | None = None
    coding_model: str | None = None
    coding_api_key: str | None = None
    coding_base_url: str | None = None
    limits: LimitsRequest | None = None
    resources: Resources = None


class CancelRequest(PadRequest):
    id: CellId | None = None  # our extension: cancel this cell (queued or running)


class InstallRequest(PadRequest):
    packages: list[str]


class ExecuteRequest(PadRequest):
    code: str
    description: str = ""
    estimated_time: str = ""
    estimated_seconds: float | None = 0.0
    # Our extensions. stream_output: also send output and display frames as they happen (off
    # by default, so clients written for the plain protocol never see frame types they do not
    # know). id: names the cell (a repeated id gives the known cell, never a second run).
    # timeout_s: a hard limit. on_disconnect: what a client that goes away mid-cell wants.
    stream_output: bool = False
    id: CellId | None = None
    timeout_s: float | None = Field(None, strict=True)
    on_disconnect: Literal["interrupt", "continue"] = "interrupt"


class SubmitCell(BaseModel):
    """A detached cell (``POST /v1/pads/{name}/cells``): it runs whoever follows it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    code: str
    id: CellId | None = Field(None, description="An idempotency key: a retry never runs twice.")
    description: str = ""
    estimated_time: str = ""
    estimated_seconds: float | None = 0.0
    timeout_s: float | None = Field(None, strict=True)


# -- from the runtime's records, and onto the wire ------------------------------------------
def cell_of(cell: runtime.Cell, **changed: Any) -> Cell:
    """The event form of a runtime cell (``changed``: fields told otherwise, e.g. a status)."""
    data = cell.to_dict()
    if changed:
        data.update(changed)
    return _made(Cell, data)


def cell_from(data: dict[str, Any]) -> Cell:
    """A cell's data (``Cell.to_dict()``'s keys, in its order; a fitted cell may lack its
    code) as its event form, unchecked."""
    return _made(Cell, data)


def from_item(cell_id: str, item: runtime.StreamItem) -> WatchEvent:
    """The feed event of one stream item of running cell ``cell_id`` (its recorded cell:
    :class:`FeedCell`)."""
    if isinstance(item, runtime.OutputEvent):
        values = {"type": "output", "id": cell_id, "stream": item.stream, "text": item.text}
        return _made(FeedOutput, values)
    if isinstance(item, runtime.DisplayEvent):
        return _made(FeedDisplay, {"type": "display", "id": cell_id, "data": item.data})
    if isinstance(item, runtime.ProgressEvent):
        return _made(FeedProgress, {"type": "progress", "id": cell_id, "message": item.message})
    return _made(FeedCell, {"type": "cell", "cell": cell_of(item)})


def frame_of(item: runtime.StreamItem) -> ProgressFrame | OutputFrame | DisplayFrame | CellFrame:
    """The execute-stream frame of one stream item."""
    if isinstance(item, runtime.OutputEvent):
        return _made(OutputFrame, {"type": "output", "stream": item.stream, "text": item.text})
    if isinstance(item, runtime.ProgressEvent):
        return _made(ProgressFrame, {"type": "progress", "message": item.message})
    if isinstance(item, runtime.DisplayEvent):
        return _made(DisplayFrame, {"type": "display", "data": item.data})
    return cell_frame(cell_of(item))


def cell_frame(cell: Cell) -> CellFrame:
    """The final frame of execute-stream (``cell`` as it goes out: whole, or fitted)."""
    return _made(CellFrame, {"type": "cell", "cell": cell})


def watched_pad(info: dict[str, Any]) -> WatchedPad:
    """The event form of a pad's line (``PadInfo.to_dict()`` of runtime/padinfo.py)."""
    running = info.get("running")
    if running is not None:
        info = {**info, "running": RunningBrief.model_construct(**running)}
    return WatchedPad.model_construct(**info)


def members(union: Any) -> tuple[type[BaseModel], ...]:
    """The models of an event union (``ExecuteFrame``, ``FeedFrame`` ...)."""
    found: list[type[BaseModel]] = []
    for arg in get_args(union):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            found.append(arg)
        else:
            found.extend(members(arg))
    return tuple(found)


# -- a cell's journal as a stream sends it (GET /v1/pads/{name}/cells/{id}/events) ----------
def _numbered(event: type[BaseModel]) -> type[Model]:
    """``event`` with the two fields of a journal's frame after its own (derived, so the
    documented frame never drifts from the event)."""
    name = "Numbered" + event.__name__.removeprefix("Feed")
    summary = (event.__doc__ or "").strip().split("\n\n")[0]
    doc = f"{summary}\n\nAs a cell's journal sends it: with its number and generation."
    return create_model(
        name,
        __base__=cast("type[Model]", event),
        __doc__=doc,
        __module__=__name__,
        seq=(int, Field(description="The frame's number: from 1 per cell (resume after it).")),
        gen=(int, Field(description="The pad's kernel generation that produced it.")),
    )


NUMBERED: dict[type[BaseModel], type[Model]] = {
    event: _numbered(event) for event in members(CellEvent)
}
JournalFrame: Any = Annotated[
    Union[tuple(NUMBERED.values())],  # noqa: UP007
    Field(discriminator="type"),
]


def numbered(event: BaseModel, seq: int, gen: int) -> Model:
    """The frame of ``event`` (of :data:`CellEvent`) numbered ``seq`` in generation ``gen``."""
    return _made(NUMBERED[type(event)], {**event.__dict__, "seq": seq, "gen": gen})


def queued(brief: CellBrief, gen: int | None, last_seq: int | None) -> QueuedCell:
    """A queued cell as it stands: its brief, and where its journal is."""
    values = {name: brief.__dict__[name] for name in CellBrief.model_fields}
    return _made(QueuedCell, {**values, "status": "queued", "gen": gen, "last_seq": last_seq})


def running(state: RunningState, gen: int | None, last_seq: int | None) -> RunningCell:
    """The running cell as it stands: what it printed so far, and where its journal is."""
    values = {**state.__dict__, "status": "running", "gen": gen, "last_seq": last_seq}
    return _made(RunningCell, values)


def recorded(cell: Cell, gen: int | None, last_seq: int | None) -> RecordedCell:
    """A recorded cell (its event form, possibly fitted) as it stands."""
    return _made(RecordedCell, {**cell.__dict__, "gen": gen, "last_seq": last_seq})
