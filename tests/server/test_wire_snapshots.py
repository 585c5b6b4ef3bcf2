"""The bytes on the wire, pinned: the frames of ``execute-stream`` (plain and
``stream_output`` clients), the pad feed's events, and the parts of ``/openapi.json`` that
describe them, compared with snapshots in ``snapshots/``. A change here changes what clients
written elsewhere read: it must be deliberate (rewrite the snapshots with
``WRITE_WIRE_SNAPSHOTS=1`` and say why in the commit)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from scratchpad.errors import PadClosedError, PadNotFoundError, ScratchpadError
from scratchpad.runtime import padinfo, watch
from scratchpad.runtime.cell import Cell, DisplayEvent, OutputEvent, ProgressEvent, StreamItem
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.app import create_app
from scratchpad.server.frames import cell_frames
from scratchpad.server.openapi import document
from scratchpad.server.pad_feed_routes import _feed
from scratchpad.server.sse import encode

SNAPSHOTS = Path(__file__).parent / "snapshots"
WHOLE_UP_TO = 4096  # longer frames are pinned by their length and digest
NOW = 1_700_000_000.5
PAD = "wire pad/ü"
DOCUMENTED = (  # the operations whose schemas are pinned (and what they reference)
    "/scratchpad/start",
    "/scratchpad/reset",
    "/scratchpad/close",
    "/scratchpad/cancel",
    "/scratchpad/cleanup",
    "/scratchpad/install",
    "/scratchpad/execute-stream",
    "/v1/pads",
    "/v1/pads/{name}",
    "/v1/pads/{name}/cells/{cell_id}",
    "/v1/pads/{name}/events",
    "/v1/pads/{name}/info",
)


def check(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("WRITE_WIRE_SNAPSHOTS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        lines = zip(text.splitlines(), expected.splitlines(), strict=False)
        for number, (got, want) in enumerate(lines):
            assert got == want, f"{name}, line {number + 1}"
        assert text == expected, f"{name}: {len(text)} characters, the snapshot {len(expected)}"


def pinned(frames: list[bytes]) -> str:
    """Frames as they went out, one a line: whole when short, else length and digest."""
    lines = []
    for data in frames:
        if len(data) <= WHOLE_UP_TO:
            lines.append(json.dumps(data.decode()))
        else:
            lines.append(f"{len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}")
    return "\n".join(lines) + "\n"


def recorded(number: int, **fields: Any) -> Cell:
    """A cell with every field set (and some text that JSON escapes)."""
    values: dict[str, Any] = {
        "code": "print('out')\ndisplay(Picture())\n41 + 1  # ü \u2028",
        "stdout": "out\n",
        "stderr": "warn \x01\n",
        "error": None,
        "description": "a rich cell",
        "estimated_time": "1s",
        "logs": "half\n",
        "id": f"cell-{number}",
        "status": "ok",
        "result": "42",
        "outputs": [{"image/png": "iVBORw0KGgo=", "text/plain": "<Picture>"}],
        "duration_s": 0.25,
        "number": number,
        "result_data": {"text/html": "<b>42</b>"},
        "outputs_at": [[4, 0]],
    }
    return Cell(**{**values, **fields})


ITEMS: list[StreamItem] = [
    ProgressEvent("half ✓"),
    OutputEvent("stdout", "out\n"),
    OutputEvent("stderr", "warn \x01\n"),
    DisplayEvent({"image/png": "iVBORw0KGgo=", "text/plain": "<Picture>"}),
]


class StubPad:
    """A pad that streams given items, then maybe fails."""

    name = PAD

    def __init__(self, items: list[StreamItem], error: ScratchpadError | None = None) -> None:
        self.items = items
        self.error = error

    async def execute_streaming(self, code: str, **options: Any) -> AsyncIterator[StreamItem]:
        for item in self.items:
            yield item
        if self.error is not None:
            raise self.error


async def execute_frames(pad: StubPad, *, stream_output: bool) -> list[bytes]:
    frames = cell_frames(
        pad,  # type: ignore[arg-type]
        code="c",
        description="",
        estimated_time="",
        estimated_seconds=0.0,
        timeout_s=None,
        cell_id="cell-1",
        stream_output=stream_output,
    )
    return [encode(frame) async for frame in frames]


@pytest.mark.parametrize("stream_output", [False, True])
async def test_execute_stream_frames_keep_their_bytes(stream_output: bool) -> None:
    big = recorded(2, stdout="a" * 100_000, error="e" * 30_000, status="error", result=None)
    frames = [
        *await execute_frames(StubPad([*ITEMS, recorded(1)]), stream_output=stream_output),
        *await execute_frames(StubPad([ProgressEvent("p"), big]), stream_output=stream_output),
        *await execute_frames(StubPad([], PadClosedError("gone \x02")), stream_output=False),
    ]
    check(f"execute_stream{'_output' * stream_output}.txt", pinned(frames))


async def test_feed_events_keep_their_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: NOW)
    info = padinfo.PadInfo(PAD, "busy", 3, 1, NOW, {"id": "cell-4", "description": "d"}, 7)
    monkeypatch.setattr(padinfo, "describe_now", lambda pad, w, status=None: info.to_dict())
    pad = watch.PadWatch(PAD)
    subscription = pad.subscribe()
    before = pad.state()
    queued = recorded(4, stdout="", outputs=[], code="x = 1\n" * 3, description="q\x00")
    never = recorded(5, code="never()")
    pad.queued(queued)
    pad.queued(never)
    pad.started(queued)
    pad.seen([*ITEMS, OutputEvent("stdout", "ab" * 40_000), queued])
    during = pad.state()
    pad.recorded(recorded(4, stdout="x" * 1_100_000))
    pad.gone(never)
    pad.status(StubPad([]))  # type: ignore[arg-type]
    late = pad.subscribe(max_events=1)
    pad.queued(queued)
    pad.started(queued)
    subscription.close()
    events = [encode(event) async for event in subscription]
    events += [encode(event) async for event in late]
    events += [encode(during)]  # the running cell's snapshot, as a late subscriber sees it
    check("feed_events.txt", pinned(events))

    class Manager:
        async def pad_info(self, name: str) -> padinfo.PadInfo:
            raise PadNotFoundError(name)

    again = pad.subscribe()
    pad.recorded(recorded(6, stdout="y" * 1_100_000))
    again.close()
    sent = [encode(frame) async for frame in _feed(Manager(), PAD, again, before)]  # type: ignore[arg-type]
    check("feed_route.txt", pinned(sent))


def referenced(value: Any, found: set[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref" and isinstance(item, str):
                found.add(item.rsplit("/", 1)[-1])
            else:
                referenced(item, found)
    elif isinstance(value, list):
        for item in value:
            referenced(item, found)


async def test_the_documented_cells_frames_and_requests_keep_their_schemas(
    manager: ScratchpadManager,
) -> None:
    doc = document(create_app(manager, api_key="k"))
    paths = {path: doc["paths"][path] for path in DOCUMENTED}
    schemas = doc["components"]["schemas"]
    names: set[str] = set()
    referenced(paths, names)
    while True:  # the models those reference, and theirs
        more = set(names)
        for name in names:
            referenced(schemas[name], more)
        if more == names:
            break
        names = more
    pinned_part = {"paths": paths, "schemas": {name: schemas[name] for name in sorted(names)}}
    check("openapi_events.json", json.dumps(pinned_part, indent=1, sort_keys=True) + "\n")
