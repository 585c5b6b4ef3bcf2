"""What an ``execute-stream`` says: the frames of one cell, and the size they may have.

Progress frames (and, for clients that asked with ``stream_output``, output and display
frames), then exactly one ``cell`` or ``error`` frame. Clients written for the plain protocol
read SSE line by line with limits (aiohttp: 128 KiB a line), so for them the final frame is
fitted under ``PLAIN_FRAME_BYTES`` *encoded* (a control character costs 6 bytes in JSON):
long fields keep their head and tail with a note saying what was cut and where the whole
cell is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from scratchpad.errors import ScratchpadError
from scratchpad.padnames import url_component
from scratchpad.runtime.base import ScratchpadRuntime
from scratchpad.runtime.cell import Cell, DisplayEvent, OutputEvent, ProgressEvent, fit_cell
from scratchpad.scrub import scrub
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
) -> AsyncIterator[dict[str, Any]]:
    """The frames of one cell run in ``pad``."""
    try:
        async for item in pad.execute_streaming(
            code,
            description=description,
            estimated_time=estimated_time,
            estimated_seconds=estimated_seconds,
            timeout_s=timeout_s,
            cell_id=cell_id,
        ):
            if isinstance(item, ProgressEvent):
                yield {"type": "progress", "message": item.message}
            elif isinstance(item, OutputEvent) and stream_output:
                yield {"type": "output", "stream": item.stream, "text": item.text}
            elif isinstance(item, DisplayEvent) and stream_output:
                yield {"type": "display", "data": item.data}
            elif isinstance(item, Cell):
                cell = item.to_dict()
                if not stream_output:
                    where = f"GET /v1/pads/{url_component(pad.name)}/cells/{item.id}"
                    cell = fit_cell(
                        cell, PLAIN_FRAME_BYTES, f"to fit the stream; the whole cell: {where}"
                    )
                yield {"type": "cell", "cell": cell}
    except ScratchpadError as exc:
        yield error_frame(exc)


def error_frame(exc: ScratchpadError) -> dict[str, Any]:
    """The final frame of a cell the server could not run (its message kept short)."""
    message = cut_middle(scrub(str(exc)), PLAIN_FRAME_BYTES // 8)
    return {"type": "error", "error": message, "error_type": type(exc).__name__}
