"""What an ``execute-stream`` says: the frames of one cell, and the size they may have.

Progress frames (and, for clients that asked with ``stream_output``, output and display
frames), then exactly one ``cell`` or ``error`` frame. Clients written for the plain protocol
read SSE line by line with limits (aiohttp: 128 KiB a line), so for them the final frame is
fitted under ``PLAIN_FRAME_BYTES`` *encoded* (a control character costs 6 bytes in JSON):
long fields keep their head and tail with a note saying what was cut and where the whole
cell is.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from scratchpad.errors import ScratchpadError
from scratchpad.runtime.base import ScratchpadRuntime
from scratchpad.runtime.cell import Cell, DisplayEvent, OutputEvent, ProgressEvent
from scratchpad.runtime.names import url_component

PLAIN_FRAME_BYTES = 60 * 1024  # under DESIGN's 64 KiB, with room for "data: " and framing
TEXT_FIELDS = ("stdout", "stderr", "logs", "error", "result", "code", "description")


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
                    cell = fit_cell(cell, pad.name, PLAIN_FRAME_BYTES)
                yield {"type": "cell", "cell": cell}
    except ScratchpadError as exc:
        yield error_frame(exc)


def error_frame(exc: ScratchpadError | str) -> dict[str, Any]:
    """The final frame of a cell the server could not run (its message kept short)."""
    if isinstance(exc, str):
        return {"type": "error", "error": exc}
    message = _cut(str(exc), PLAIN_FRAME_BYTES // 8, "")
    return {"type": "error", "error": message, "error_type": type(exc).__name__}


def encoded_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "replace"))


def fit_cell(cell: dict[str, Any], pad_name: str, limit: int) -> dict[str, Any]:
    """The cell, its long fields cut until its frame encodes to at most ``limit`` bytes."""
    if encoded_size({"type": "cell", "cell": cell}) <= limit:
        return cell
    where = f"GET /v1/pads/{url_component(pad_name)}/cells/{cell.get('id', '')}"
    cell = dict(cell)
    outputs = cell.get("outputs") or []
    if encoded_size(outputs) > limit // 4:
        kinds = sorted({kind for bundle in outputs for kind in bundle})
        note = f"[{len(outputs)} output(s) ({', '.join(kinds)}) left out of the stream; "
        cell["outputs"] = [{"text/plain": f"{note}the whole cell: {where}]"}]
    for field in TEXT_FIELDS:  # nothing longer than the whole frame can stay whole
        if isinstance(cell.get(field), str) and len(cell[field]) > limit:
            cell[field] = _cut(cell[field], limit, where)
    for _ in range(100):
        size = encoded_size({"type": "cell", "cell": cell})
        if size <= limit:
            break
        longest = max(
            (f for f in TEXT_FIELDS if isinstance(cell.get(f), str)),
            key=lambda f: encoded_size(cell[f]),
        )
        text = cell[longest]
        ratio = len(text) / max(1, encoded_size(text))
        keep = len(text) - int((size - limit) * ratio) - len(where) - 100
        cut = _cut(text, max(keep, len(text) // 2), where)
        cell[longest] = cut if encoded_size(cut) < encoded_size(text) else ""
    return cell


def _cut(text: str, keep: int, where: str) -> str:
    if len(text) <= keep:
        return text
    half = keep // 2
    see = f"; the whole cell: {where}" if where else ""
    note = f"\n[... {len(text) - 2 * half} characters cut to fit the stream{see} ...]\n"
    return text[:half] + note + text[len(text) - half :]


def _stub(bundle: dict[str, Any], where: str) -> dict[str, Any]:
    kinds = ", ".join(sorted(bundle))
    return {"text/plain": f"[output ({kinds}) left out of the stream; the whole cell: {where}]"}
