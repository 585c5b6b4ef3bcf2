"""Detached cells over HTTP: submit a cell, leave, and come back to it by id.

``POST /v1/pads/{name}/cells`` accepts a cell (202) that runs whether or not anyone follows
it; its ``id`` is an idempotency key (runtime/accepts.py). ``GET .../cells/{id}`` is the cell
as it stands (recorded, or queued/running with its output so far); ``GET .../cells/{id}/events``
streams its journal (runtime/journal.py): every frame has ``id: <cell>:<seq>``, a client
that comes back with ``Last-Event-ID`` (or ``?after=``) gets what it missed and nothing twice,
or a ``resync`` frame with the cell as it stands when the journal moved on (or is gone, after
a server restart); the stream ends after the runtime's record of the cell. ``POST .../wait``
long-polls (at most ``WAIT_MAX_S`` a call), ``POST .../cancel`` cancels, ``GET .../cells``
lists the running, queued and recently finished cells.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, Union

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from scratchpad import events
from scratchpad.errors import InvalidInputError, PadNotFoundError
from scratchpad.events import CellFrame, CellId, FeedDisplay, FeedOutput, FeedProgress, FeedStarted
from scratchpad.padnames import url_component, validate_pad_name
from scratchpad.runtime.accepts import submit
from scratchpad.runtime.base import check_cell_id, check_execute_args
from scratchpad.runtime.cell import Cell, fit_cell, rough_chars
from scratchpad.runtime.journal import CellJournal, JournalReader
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.timeouts import check_timeout
from scratchpad.runtime.watch import PadWatch, brief
from scratchpad.server.guard import segment_name
from scratchpad.server.openapi import answers, sse
from scratchpad.server.pad_feed_routes import whole_text_note
from scratchpad.server.schemas import CancelAnswer, CellIdPath, PadPath
from scratchpad.server.sse import EventStream

WAIT_MAX_S = 30.0  # one long poll waits at most this long; the client asks again
WAIT_DEFAULT_S = 10.0
EVENTS_PACE_BYTES = 256 * 1024  # a client further behind leaves frames in the journal
FRAME_CELL_BYTES = 1024 * 1024  # the record in a stream: long fields cut (read by slices)
BIG_CELL_CHARS = 256 * 1024


class SubmitCell(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str
    id: CellId | None = Field(None, description="An idempotency key: a retry never runs twice.")
    description: str = ""
    estimated_time: str = ""
    estimated_seconds: float | None = 0.0
    timeout_s: float | None = Field(None, strict=True)


class CellStanding(BaseModel):
    """A cell as it stands: queued or running (with what it printed so far), or, once
    recorded, the recorded cell's fields with its final ``status``."""

    model_config = ConfigDict(extra="allow")
    id: str
    status: str = Field(description="queued, running, or the recorded cell's status.")
    number: int = 0
    gen: int | None = Field(None, description="The pad's kernel generation it ran in.")
    last_seq: int | None = Field(None, description="The number of its latest event.")
    ended_at: float | None = Field(
        None, description="Epoch seconds it ended (a recently finished cell, in a list)."
    )


class CellList(BaseModel):
    cells: list[CellStanding]


class Resync(BaseModel):
    """The cell as it stands, for a client whose frames the journal no longer holds."""

    model_config = ConfigDict(extra="allow")
    type: Literal["resync"]
    cell: CellStanding
    seq: int
    gen: int


CELL_FRAMES = Annotated[
    Union[FeedStarted, FeedOutput, FeedDisplay, FeedProgress, CellFrame, Resync],  # noqa: UP007
    Field(discriminator="type"),
]
ENDING = (
    "each with an `id: <cell>:<seq>` line (send it back as `Last-Event-ID` to resume); the "
    "last one is the runtime's record of the cell (`cell`, or a `resync` of a finished cell)"
)


def cells_routes(manager: ScratchpadManager) -> APIRouter:
    router = APIRouter()

    accepted = answers(CellStanding, 400, 409, 422, 503, description="Accepted.")
    accepted["responses"][202] = accepted["responses"].pop(200)

    @router.post("/v1/pads/{name}/cells", status_code=202, **accepted)
    async def submit_cell(name: PadPath, body: SubmitCell) -> JSONResponse:
        """Accept a cell that runs whoever follows it (202, `Location` its URL). The same
        `id` with the same payload answers that cell and never runs it twice; with another
        payload 422; while the first is still being accepted 409."""
        name = validate_pad_name(segment_name(name))
        timeout_s = None
        if body.timeout_s is not None:
            timeout_s = check_timeout(body.timeout_s, manager.settings)
        request = check_execute_args(
            body.code, body.description, _estimate(body.estimated_seconds),
            body.estimated_time, body.id, timeout_s,
        )  # fmt: skip
        done = await submit(manager, name, request, timeout_s)
        standing = await _standing(manager, name, done.id)
        where = f"/v1/pads/{url_component(name)}/cells/{url_component(done.id)}"
        return JSONResponse(standing, status_code=202, headers={"location": where})

    @router.get("/v1/pads/{name}/cells", **answers(CellList, 400))
    async def list_cells(
        name: PadPath,
        status: Annotated[
            Literal["running", "queued", "recent"] | None,
            Query(description="Only these (recent: finished in the last minutes)."),
        ] = None,
    ) -> dict[str, Any]:
        """The pad's running, queued and recently finished cells."""
        watch = manager.watch(segment_name(name))
        cells = []
        if status in (None, "running") and watch.running is not None:
            cells.append(_live(watch, watch.running.cell, "running"))
        if status in (None, "queued"):
            cells += [_live(watch, cell, "queued") for cell in watch.queue.values()]
        if status in (None, "recent"):
            for journal in watch.journals.finished():
                assert journal.terminal is not None and journal.finished_at is not None
                record = journal.terminal.cell()
                ended_at = time.time() - (time.monotonic() - journal.finished_at)
                cells.append({**_brief_of(record), **_where(journal), "ended_at": ended_at})
        return {"cells": cells}

    @router.get("/v1/pads/{name}/cells/{cell_id}", **answers(CellStanding, 400, 404))
    async def pad_cell(name: PadPath, cell_id: CellIdPath) -> Response:
        """The cell as it stands: recorded (the whole cell), or queued or running with its
        output so far."""
        standing = await _standing(manager, segment_name(name), cell_id)
        return await _encoded(standing)

    @router.get(
        "/v1/pads/{name}/cells/{cell_id}/events", **sse(CELL_FRAMES, 400, 404, ending=ENDING)
    )
    async def cell_events(
        name: PadPath,
        cell_id: CellIdPath,
        after: Annotated[
            int | None, Query(ge=0, description="Resume after this event number.")
        ] = None,
        last_event_id: Annotated[str | None, Header(include_in_schema=False)] = None,
    ) -> EventStream:
        """The cell's events from the start (or after `Last-Event-ID`/`after`), live, until
        the runtime's record of it."""
        name = validate_pad_name(segment_name(name))
        check_cell_id(cell_id)
        seq = _resume_point(cell_id, after, last_event_id)
        watch = manager.watch(name)
        journal = watch.journals.get(cell_id)
        standing = None
        if journal is None:  # no journal (finished long ago, or before a restart): the cell
            standing = await _standing(manager, name, cell_id)  # 404 when there is none
        closed = asyncio.Event()
        return EventStream(
            _events(name, watch, cell_id, seq, standing, closed),
            on_disconnect=closed.set,
            final_types=frozenset({"cell"}),
            pace_bytes=EVENTS_PACE_BYTES,
            event_id=lambda frame: f"{cell_id}:{frame['seq']}",
        )

    @router.post("/v1/pads/{name}/cells/{cell_id}/wait", **answers(CellStanding, 400, 404))
    async def wait_cell(
        name: PadPath,
        cell_id: CellIdPath,
        timeout: Annotated[
            float, Query(ge=0, description=f"Seconds to wait; at most {WAIT_MAX_S:g}.")
        ] = WAIT_DEFAULT_S,
    ) -> dict[str, Any]:
        """The cell once it ended, else (after `timeout`, at most 30 s) how it stands."""
        name = segment_name(name)
        check_cell_id(cell_id)
        journal = manager.watch(name).journals.get(cell_id)
        if journal is not None and journal.terminal is None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(timeout, WAIT_MAX_S)):
                    await journal.ended.wait()
        return await _standing(manager, name, cell_id)

    @router.post("/v1/pads/{name}/cells/{cell_id}/cancel", **answers(CancelAnswer, 400))
    async def cancel_cell(name: PadPath, cell_id: CellIdPath) -> dict[str, Any]:
        """Cancel the cell: a queued one never runs, a running one is interrupted."""
        check_cell_id(cell_id)
        return {"ok": True, "cancelled": await manager.cancel(segment_name(name), cell_id)}

    return router


async def _encoded(data: dict[str, Any]) -> Response:
    """A JSON answer encoded on a worker thread (a recorded cell can be many MB)."""
    body = await asyncio.to_thread(lambda: json.dumps(data, ensure_ascii=False).encode())
    return Response(body, media_type="application/json")


def _estimate(seconds: float | None) -> float:
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return 0.0
    return seconds


def _resume_point(cell_id: str, after: int | None, last_event_id: str | None) -> int:
    """The number of the last event the client has (0: none)."""
    if last_event_id:
        named, _, seq = last_event_id.strip().rpartition(":")
        if named != cell_id or not seq.isdigit():
            raise InvalidInputError(
                f"Last-Event-ID {last_event_id[:80]!r} is not an event of cell {cell_id!r}: "
                "send the `id:` of its last frame you read (<cell>:<seq>)"
            )
        return int(seq)
    return after or 0


def _where(journal: CellJournal) -> dict[str, Any]:
    return {"gen": journal.gen, "last_seq": journal.last_seq}


def _brief_of(record: dict[str, Any]) -> dict[str, Any]:
    return {key: record.get(key) for key in ("id", "number", "status", "description")}


def _live(watch: PadWatch, cell: Cell, status: str) -> dict[str, Any]:
    """A queued or running cell, with its output so far when it runs."""
    running = watch.running
    state = running.state() if running is not None and running.cell is cell else brief(cell)
    journal = watch.journals.get(cell.id)
    where = _where(journal) if journal is not None else {"gen": None, "last_seq": None}
    return {**events.wire(state), "status": status, **where}


async def _standing(manager: ScratchpadManager, name: str, cell_id: str) -> dict[str, Any]:
    """Cell ``cell_id`` of pad ``name`` as it stands (404 when the pad has no such cell)."""
    check_cell_id(cell_id)
    watch = manager.watch(name)
    queued = watch.queue.get(cell_id)
    if queued is not None:
        return _live(watch, queued, "queued")
    if watch.running is not None and watch.running.cell.id == cell_id:
        return _live(watch, watch.running.cell, "running")
    journal = watch.journals.get(cell_id)
    if journal is not None and journal.terminal is not None:
        return {**journal.terminal.cell(), **_where(journal)}
    for cell in reversed(await manager.peek(name).load_cells()):
        if cell.id == cell_id:
            return {**cell.to_dict(), "gen": None, "last_seq": None}
    raise PadNotFoundError(
        f"pad {name!r} has no cell {cell_id[:80]!r} (it may have been folded away from a long "
        "history, or the pad was reset)"
    )


async def _events(
    name: str,
    watch: PadWatch,
    cell_id: str,
    seq: int,
    standing: dict[str, Any] | None,
    closed: asyncio.Event,
) -> AsyncIterator[dict[str, Any]]:
    """The frames of the cell's journal after ``seq`` (a resync first when it moved on)."""
    journals = watch.journals
    journals.attached += 1  # a client follows this pad now
    try:
        journal = journals.get(cell_id)
        if journal is None:
            assert standing is not None
            yield {"type": "resync", "cell": await _fitted(name, standing), "seq": 0, "gen": 0}
            return
        reader = JournalReader(journal, seq, closed)
        while True:
            resync = False
            async for frame in reader.frames():
                if frame is None:
                    resync = True
                    break
                event = frame.wire()
                if event["type"] == "cell":
                    event["cell"] = await _fitted(name, event["cell"])
                yield event
            if not resync:
                return
            now = _live_or_record(watch, journal)  # no await since the reader's last look
            reader.seq = journal.last_seq
            yield {"type": "resync", "cell": await _fitted(name, now), **_frame_at(journal)}
            if journal.terminal is not None:
                return
    finally:
        journals.attached -= 1


def _frame_at(journal: CellJournal) -> dict[str, Any]:
    return {"seq": journal.last_seq, "gen": journal.gen}


def _live_or_record(watch: PadWatch, journal: CellJournal) -> dict[str, Any]:
    if journal.terminal is not None:
        return {**journal.terminal.cell(), **_where(journal)}
    cell_id = journal.cell_id
    if watch.running is not None and watch.running.cell.id == cell_id:
        return _live(watch, watch.running.cell, "running")
    queued = watch.queue.get(cell_id)
    if queued is not None:
        return _live(watch, queued, "queued")
    return {"id": cell_id, "status": "running", **_where(journal)}


async def _fitted(name: str, cell: dict[str, Any]) -> dict[str, Any]:
    """A cell fitted for a stream frame (its long fields are read by slices)."""
    why = whole_text_note(name, cell["id"], "to fit the stream")
    if rough_chars(cell) < BIG_CELL_CHARS:
        return fit_cell(cell, FRAME_CELL_BYTES, why)
    return await asyncio.to_thread(fit_cell, cell, FRAME_CELL_BYTES, why)
