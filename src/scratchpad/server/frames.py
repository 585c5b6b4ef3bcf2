"""What an ``execute-stream`` says: the frames of one cell, and the size they may have.

Progress frames (and, for clients that asked with ``stream_output``, output and display
frames), then exactly one ``cell`` or ``error`` frame. Clients written for the plain protocol
read SSE line by line with limits (aiohttp: 128 KiB a line), so for them the final frame is
fitted under ``PLAIN_FRAME_BYTES`` *encoded* (a control character costs 6 bytes in JSON):
its code stays whole (the client sent it), and each long field keeps its head and tail around
one note saying how much was cut and where the whole text is (the cell's text endpoint).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from scratchpad import events
from scratchpad.errors import ScratchpadError
from scratchpad.events import ErrorFrame, ExecuteFrame
from scratchpad.runtime.base import ScratchpadRuntime
from scratchpad.runtime.cell import Cell, ProgressEvent, encoded_size, fit_cell
from scratchpad.scrub import scrub
from scratchpad.server.pad_feed_routes import whole_text_note
from scratchpad.text import cut_middle

PLAIN_FRAME_BYTES = 60 * 1024  # under DESIGN's 64 KiB, with room for "data: " and framing


async def cell_frames(
    pad: ScratchpadRuntime,
    *,
    code: str,
    description: str,
    estimated_time: str,
    estimated_seconds: float,
    timeout_s: float | None,
    cell_id: str,
    stream_output: bool,
) -> AsyncIterator[ExecuteFrame]:
    """The frames of one cell run in ``pad`` (typed; the stream sends them as JSON)."""
    try:
        async for item in pad.execute_streaming(
            code,
            description=description,
            estimated_time=estimated_time,
            estimated_seconds=estimated_seconds,
            timeout_s=timeout_s,
            cell_id=cell_id,
        ):
            if isinstance(item, Cell) and not stream_output:
                yield events.cell_frame(plain_cell(pad, item))
            elif stream_output or isinstance(item, (ProgressEvent, Cell)):
                yield events.frame_of(item)
    except ScratchpadError as exc:
        yield error_frame(exc)


def plain_cell(pad: ScratchpadRuntime, recorded: Cell) -> events.Cell:
    """The cell fitted under ``PLAIN_FRAME_BYTES``: its code whole (the client sent it; code
    too long to fit beside the rest is left out, and such clients keep what they sent), each
    long field cut once with a note of how much went and where its whole text is."""
    note = whole_text_note(pad.name, recorded.id, "to fit the stream")
    cell = recorded.to_dict()
    code = cell.pop("code")
    room = PLAIN_FRAME_BYTES - encoded_size(code)
    if room < PLAIN_FRAME_BYTES // 2:
        return events.cell_from(fit_cell(cell, PLAIN_FRAME_BYTES, note))
    return events.cell_from({"code": code, **fit_cell(cell, room, note)})


def error_frame(exc: ScratchpadError) -> ErrorFrame:
    """The final frame of a cell the server could not run (its message kept short)."""
    message = cut_middle(scrub(str(exc)), PLAIN_FRAME_BYTES // 8)
    return ErrorFrame.model_construct(error=message, error_type=type(exc).__name__)
