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
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Header, Query
from fastapi.responses import Response
from pydantic import BaseModel

from scratchpad import events
from scratchpad.errors import InvalidInputError, PadNotFoundError
from scratchpad.events import (
    CellList,
    CellStanding,
    FeedCell,
    QueuedCell,
    RecordedBrief,
    RecordedCell,
    Resync,
    RunningCell,
    SubmitCell,
)
from scratchpad.padnames import url_component, validate_pad_name
from scratchpad.runtime.accepts import submit
from scratchpad.runtime.base import check_cell_id, check_execute_args
from scratchpad.runtime.cell import fit_cell, rough_chars
from scratchpad.runtime.handle import as_it_stands, unknown
from scratchpad.runtime.journal import CellJournal, JournalReader
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.timeouts import check_timeout
from scratchpad.runtime.watch import PadWatch
from scratchpad.server.guard import segment_name
from scratchpad.server.openapi import answers, one_of, sse
from scratchpad.server.pad_feed_routes import whole_text_note
from scratchpad.server.schemas import CancelAnswer, CellIdPath, PadPath
from scratchpad.server.sse import EventStream
from scratchpad.wire import made, wire

WAIT_MAX_S = 30.0  # one long poll waits at most this long; the client asks again
WAIT_DEFAULT_S = 10.0
EVENTS_PACE_BYTES = 256 * 1024  # a client further behind leaves frames in the journal
FRAME_CELL_BYTES = 1024 * 1024  # the record in a stream: long fields cut (read by slices)
BIG_CELL_CHARS = 256 * 1024

Standing = QueuedCell | RunningCell | RecordedCell  # a cell as it stands (CellStanding)
M = TypeVar("M", bound=BaseModel)
ENDING = (
    "each with an `id: <cell>:<seq>` line (send it back as `Last-Event-ID` to resume); the "
    "last one is the runtime's record of the cell (`cell`, or a `resync` of a finished cell)"
)


def cells_routes(manager: ScratchpadManager) -> APIRouter:
    router = APIRouter()

    accepted = answers(one_of(CellStanding), 400, 409, 422, 503, description="Accepted.")
    accepted["responses"][202] = accepted["responses"].pop(200)

    @router.post("/v1/pads/{name}/cells", status_code=202, **accepted)
    async def submit_cell(name: PadPath, body: SubmitCell) -> Response:
        """Accept a cell that runs whoever follows it (202, `Location` its URL). The same
        `id` with the same payload answers that cell and never runs it twice; with another
        payload 422; while the first is still being accepted 409."""
        name = validate_pad_name(segment_name(name))
        timeout_s = None
        if body.timeout_s is not None:
            timeout_s = check_timeout(body.timeout_s, manager.settings)
        request = check_execute_args(
            body.code, body.description,
            0.0 if body.estimated_seconds is None else body.estimated_seconds,
            body.estimated_time, body.id, timeout_s,
        )  # fmt: skip
        done = await submit(manager, name, request, timeout_s)
        standing = await _standing(manager, name, done.id)
        where = f"/v1/pads/{url_component(name)}/cells/{url_component(done.id)}"
        return await _encoded(standing, status=202, headers={"location": where})

    @router.get("/v1/pads/{name}/cells", **answers(CellList, 400, 404))
    async def list_cells(
        name: PadPath,
        status: Annotated[
            Literal["running", "queued", "recent"] | None,
            Query(description="Only these (recent: finished in the last minutes)."),
        ] = None,
    ) -> dict[str, Any]:
        """The pad's running, queued and recently finished cells."""
        name = segment_name(name)
        watch = manager.watch(name)
        idle = watch.running is None and not watch.queue and not watch.journals.by_id
        if idle and not await manager.has_pad(name):
            raise PadNotFoundError(f"no pad named {name!r}; create it by running a cell in it")
        cells: list[QueuedCell | RunningCell | RecordedBrief] = []
        running = watch.running
        if status in (None, "running") and running is not None:
            cells += _live(watch, [running.cell.id])
        if status in (None, "queued"):
            cells += _live(watch, list(watch.queue))
        if status in (None, "recent"):
            cells += [_recent(journal) for journal in watch.journals.finished()]
        return wire(made(CellList, {"cells": cells}))

    @router.get("/v1/pads/{name}/cells/{cell_id}", **answers(one_of(CellStanding), 400, 404))
    async def pad_cell(name: PadPath, cell_id: CellIdPath) -> Response:
        """The cell as it stands: recorded (the whole cell), or queued or running with its
        output so far."""
        return await _encoded(await _standing(manager, segment_name(name), cell_id))

    frames = sse(events.JournalFrame, 400, 404, ending=ENDING)

    @router.get("/v1/pads/{name}/cells/{cell_id}/events", **frames)
    async def cell_events(
        name: PadPath,
        cell_id: CellIdPath,
        after: Annotated[
            int | None, Query(ge=0, description="Resume after this event number.")
        ] = None,
        last_event_id: Annotated[
            str | None,
            Header(
                description="Resume after this frame: the `id:` of the last frame read "
                "(`<cell>:<seq>`); it wins over `after`."
            ),
        ] = None,
    ) -> EventStream:
        """The cell's events from the start (or after `Last-Event-ID`/`after`), live, until
        the runtime's record of it."""
        name = validate_pad_name(segment_name(name))
        check_cell_id(cell_id)
        seq = _resume_point(cell_id, after, last_event_id)
        watch = manager.watch(name)
        await manager.follow(name, cell_id)  # one another server runs (a Ray pad's actor)
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

    @router.post("/v1/pads/{name}/cells/{cell_id}/wait", **answers(one_of(CellStanding), 400, 404))
    async def wait_cell(
        name: PadPath,
        cell_id: CellIdPath,
        timeout: Annotated[
            float, Query(ge=0, description=f"Seconds to wait; at most {WAIT_MAX_S:g}.")
        ] = WAIT_DEFAULT_S,
    ) -> Response:
        """The cell once it ended, else (after `timeout`, at most 30 s) how it stands."""
        name = segment_name(name)
        check_cell_id(cell_id)
        await manager.follow(name, cell_id)
        journal = manager.watch(name).journals.get(cell_id)
        if journal is not None and journal.terminal is None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(timeout, WAIT_MAX_S)):
                    await journal.ended.wait()
        return await _encoded(await _standing(manager, name, cell_id))

    @router.post("/v1/pads/{name}/cells/{cell_id}/cancel", **answers(CancelAnswer, 400))
    async def cancel_cell(name: PadPath, cell_id: CellIdPath) -> dict[str, Any]:
        """Cancel the cell: a queued one never runs, a running one is interrupted."""
        check_cell_id(cell_id)
        cancelled = await manager.cancel(segment_name(name), cell_id)
        return wire(CancelAnswer(ok=True, cancelled=cancelled))

    return router


async def _encoded(
    standing: BaseModel, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """A cell as it stands, encoded on a worker thread (a recorded cell can be many MB)."""
    body = await asyncio.to_thread(lambda: json.dumps(wire(standing), ensure_ascii=False).encode())
    return Response(body, status_code=status, headers=headers, media_type="application/json")


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


def _recent(journal: CellJournal) -> RecordedBrief:
    """A cell that ended lately, in brief."""
    assert journal.terminal is not None
    record = journal.terminal.cell().__dict__
    brief = {key: record[key] for key in ("id", "number", "status", "description")}
    assert journal.finished_at is not None
    ended_at = time.time() - (time.monotonic() - journal.finished_at)
    where = {"gen": journal.gen, "last_seq": journal.last_seq, "ended_at": ended_at}
    return made(RecordedBrief, {**brief, **where})


def _live(watch: PadWatch, cell_ids: list[str]) -> list[QueuedCell | RunningCell]:
    """Queued or running cells as they stand (one that ended meanwhile is among the recent)."""
    found = [as_it_stands(watch, cell_id, watch.journals.get(cell_id)) for cell_id in cell_ids]
    return [now for now in found if isinstance(now, (QueuedCell, RunningCell))]


async def _standing(manager: ScratchpadManager, name: str, cell_id: str) -> Standing:
    """Cell ``cell_id`` of pad ``name`` as it stands (404 when the pad has no such cell)."""
    check_cell_id(cell_id)
    watch = manager.watch(name)
    await manager.follow(name, cell_id)
    journal = watch.journals.get(cell_id)
    now = as_it_stands(watch, cell_id, journal)
    if now is not None:
        return now
    if journal is not None:  # on its way elsewhere (another server's, followed): running
        return unknown(cell_id, journal)
    for cell in reversed(await manager.peek(name).load_cells()):
        if cell.id == cell_id:
            return events.recorded(events.cell_of(cell), None, None)
    raise PadNotFoundError(
        f"pad {name!r} has no cell {cell_id[:80]!r} (it may have been folded away from a long "
        "history, or the pad was reset)"
    )


async def _events(
    name: str,
    watch: PadWatch,
    cell_id: str,
    seq: int,
    standing: Standing | None,
    closed: asyncio.Event,
) -> AsyncIterator[BaseModel]:
    """The numbered frames of the cell's journal after ``seq`` (a resync first when it
    moved on)."""
    journals = watch.journals
    journals.attached += 1  # a client follows this pad now
    try:
        journal = journals.get(cell_id)
        if journal is None:
            assert standing is not None
            yield events.numbered(Resync(cell=await _fitted(name, standing)), 0, 0)
            return

        async def standing_now() -> Resync:
            now = as_it_stands(watch, cell_id, journal) or unknown(cell_id, journal)
            return Resync(cell=await _fitted(name, now))

        async for frame in JournalReader(journal, seq, closed).follow(standing_now):
            event = frame.event
            if isinstance(event, FeedCell):
                fitted = await _fitted(name, event.cell)
                event = made(FeedCell, {"type": "cell", "cell": fitted})
            yield events.numbered(event, frame.seq, frame.gen)
    finally:
        journals.attached -= 1


async def _fitted(name: str, cell: M) -> M:
    """A cell fitted for a stream frame (its long fields are read by slices)."""
    data = wire(cell)
    why = whole_text_note(name, data["id"], "to fit the stream")
    if rough_chars(data) < BIG_CELL_CHARS:
        fitted = fit_cell(data, FRAME_CELL_BYTES, why)
    else:
        fitted = await asyncio.to_thread(fit_cell, data, FRAME_CELL_BYTES, why)
    return made(type(cell), fitted)
