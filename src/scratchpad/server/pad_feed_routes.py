"""A pad's live feed and what the web UI reads beside it.

``GET /v1/pads/{name}/events``: SSE, first a ``snapshot`` (the pad, its running cell with the
output so far, its queue, how many cells it recorded), then every event of the pad as it
happens (see runtime/watch.py), whoever ran the cell; each frame has an ``id:`` (0, 1, ...).
Frames are taken from the pad's watch only as fast as the client reads them; one that falls
too far behind gets ``{"type": "overflow"}`` and the stream ends: it reconnects and starts
from a fresh snapshot. A pad may be watched before it exists (``status: "new"``).

``GET /v1/pads/{name}/info``: one pad's line of the pad list.
``GET /v1/pads/{name}/cells/{id}/text``: a slice of one long field of a recorded cell
(:class:`TextSlice`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Query
from pydantic import BaseModel, Field

from scratchpad import events
from scratchpad.errors import InvalidInputError, PadNotFoundError
from scratchpad.events import FeedCell, FeedFrame, FeedSnapshot, WatchState
from scratchpad.padnames import url_component, validate_pad_name
from scratchpad.runtime.base import check_cell_id
from scratchpad.runtime.cell import Cell, fit_cell, rough_chars
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.padinfo import PadInfo
from scratchpad.runtime.watch import OVERFLOW, Subscription
from scratchpad.server.guard import segment_name
from scratchpad.server.openapi import answers, sse
from scratchpad.server.schemas import CellIdPath, PadPath
from scratchpad.server.sse import EventStream
from scratchpad.wire import wire

FEED_PACE_BYTES = 256 * 1024  # a client further behind leaves events in its subscription
FEED_CELL_BYTES = 1024 * 1024  # a recorded cell in the feed: long fields cut (read by slices)
BIG_CELL_CHARS = 256 * 1024  # fitted on a worker thread from this size
TEXT_FIELDS = ("stdout", "stderr", "error", "result", "logs")
DEFAULT_SLICE = 64 * 1024
MAX_SLICE = 1024 * 1024
ENDING = (
    "endless while the client reads (`: ping` comments in quiet times); a client too far "
    "behind gets `overflow`, the last frame: reconnect"
)
FIELD_HELP = f"One of {', '.join(TEXT_FIELDS)}; another answers 400."
FIELDS: dict[str, Any] = {"enum": list(TEXT_FIELDS)}  # documented; the route says what is wrong
COUNT: dict[str, Any] = {"minimum": 0}
LENGTH_HELP = f"Characters to read (at most {MAX_SLICE})."


class TextSlice(BaseModel):
    """A slice of one field of a recorded cell (counted in characters)."""

    field: Literal["stdout", "stderr", "error", "result", "logs"]
    offset: int
    length: int = Field(description="Characters in `text` (at most 1 Mi).")
    total: int = Field(description="Characters in the whole field.")
    text: str


def pad_feed_routes(app: FastAPI, manager: ScratchpadManager) -> None:
    @app.get("/v1/pads/{name}/events", **sse(FeedFrame, 400, numbered=True, ending=ENDING))
    async def pad_events(name: PadPath) -> EventStream:
        """The pad's live feed: a snapshot, then every event of the pad, whoever runs its
        cells. The pad need not exist yet (status `new`)."""
        name = validate_pad_name(segment_name(name))
        watch = manager.watch(name)
        subscription = watch.subscribe()  # from here on, every event waits in it...
        state = watch.state()  # ...and this is what came before (no await in between)
        return EventStream(
            _feed(manager, name, subscription, state),
            on_disconnect=subscription.close,
            final_types=frozenset({OVERFLOW.type}),
            pace_bytes=FEED_PACE_BYTES,
            numbered=True,
        )

    @app.get("/v1/pads/{name}/info", **answers(events.PadInfo, 400, 404))
    async def pad_info(name: PadPath) -> dict[str, Any]:
        """One pad's line of the pad list."""
        return (await manager.pad_info(segment_name(name))).to_dict()

    @app.get("/v1/pads/{name}/cells/{cell_id}/text", **answers(TextSlice, 400, 404, 422))
    async def cell_text(
        name: PadPath,
        cell_id: CellIdPath,
        field: Annotated[str, Query(description=FIELD_HELP, json_schema_extra=FIELDS)] = "stdout",
        offset: Annotated[
            int, Query(description="The first character (from 0).", json_schema_extra=COUNT)
        ] = 0,
        length: Annotated[int, Query(description=LENGTH_HELP, json_schema_extra=COUNT)] = (
            DEFAULT_SLICE
        ),
    ) -> dict[str, Any]:
        """A slice of one long field of a recorded cell (what a fitted cell cut)."""
        if field not in TEXT_FIELDS:
            raise InvalidInputError(
                f"unknown field {field[:40]!r}: ask for one of {', '.join(TEXT_FIELDS)}"
            )
        if offset < 0 or length < 0:
            raise InvalidInputError("offset and length count characters: give numbers >= 0")
        cell = await recorded_cell(manager, segment_name(name), cell_id)
        text = getattr(cell, field) or ""
        piece = text[offset : offset + min(length, MAX_SLICE)]
        answer = TextSlice(
            field=field,  # one of TEXT_FIELDS, checked above
            offset=offset,
            length=len(piece),
            total=len(text),
            text=piece,
        )
        return wire(answer)


async def _feed(
    manager: ScratchpadManager, name: str, subscription: Subscription, state: WatchState
) -> AsyncIterator[FeedFrame]:
    """The snapshot, then the pad's events (recorded cells fitted to the feed)."""
    try:
        try:
            info = (await manager.pad_info(name)).to_dict()
        except PadNotFoundError:
            info = PadInfo(name, "new", 0).to_dict()
        yield FeedSnapshot.model_construct(
            pad=events.watched_pad(info),
            running=state.running,
            queued=state.queued,
            cells=info["cells"],
        )
        async for event in subscription:
            if isinstance(event, FeedCell):
                cell = await _fitted(name, events.wire(event.cell))
                event = FeedCell.model_construct(cell=events.cell_from(cell))
            yield event
    finally:
        subscription.close()


def whole_text_note(name: str, cell_id: str, purpose: str) -> Callable[[str], str]:
    """What a fitted cell's note says after a cut of ``field``: why (``purpose``, e.g. "to fit
    the feed") and where the whole text is (this module's text slices, else the whole cell)."""
    where = f"/v1/pads/{url_component(name)}/cells/{url_component(cell_id)}"

    def note(field: str) -> str:
        if field in TEXT_FIELDS:
            return f"{purpose}; the whole text: GET {where}/text?field={field}"
        return f"{purpose}; the whole cell: GET {where}"

    return note


async def _fitted(name: str, cell: dict[str, Any]) -> dict[str, Any]:
    why = whole_text_note(name, cell["id"], "to fit the feed")
    if rough_chars(cell) < BIG_CELL_CHARS:
        return fit_cell(cell, FEED_CELL_BYTES, why)
    return await asyncio.to_thread(fit_cell, cell, FEED_CELL_BYTES, why)


async def recorded_cell(manager: ScratchpadManager, name: str, cell_id: str) -> Cell:
    """Pad ``name``'s recorded cell ``cell_id``: a 400 for an id no cell can have, a 404 for
    one it has not (yet, or any more)."""
    check_cell_id(cell_id)
    cells = await manager.peek(name).load_cells()
    for cell in reversed(cells):
        if cell.id == cell_id:
            return cell
    raise PadNotFoundError(
        f"pad {name!r} has no finished cell {cell_id[:80]!r} (it may still run, or was folded "
        "away from a long history)"
    )
