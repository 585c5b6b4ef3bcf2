"""The typed event layer: what the runtime and the server send is what events.py declares
(every frame validates against its union and comes back as the same bytes), and the fast
constructors build what pydantic's own would."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import TypeAdapter

from scratchpad import events
from scratchpad.errors import PadClosedError
from scratchpad.events import CellEvent, ExecuteFrame, FeedFrame, JournalFrame, Resync, wire
from scratchpad.runtime.cell import DisplayEvent, OutputEvent, ProgressEvent
from scratchpad.runtime.watch import PadWatch
from scratchpad.server.frames import error_frame
from tests.server.test_wire_snapshots import ITEMS, StubPad, execute_frames, recorded


def same_after_validation(union: Any, data: dict[str, Any]) -> None:
    """``data`` is an event of ``union``, and the validated event goes out as ``data``."""
    event = TypeAdapter(union).validate_python(data)
    assert json.dumps(wire(event)) == json.dumps(data)


@pytest.mark.parametrize("stream_output", [False, True])
async def test_execute_stream_frames_are_the_declared_events(stream_output: bool) -> None:
    pad = StubPad([*ITEMS, recorded(1), recorded(2, stdout="a" * 100_000)])
    sent = await execute_frames(pad, stream_output=stream_output)
    assert len(sent) == (6 if stream_output else 3)
    for frame in sent:
        same_after_validation(ExecuteFrame, json.loads(frame.removeprefix(b"data: ")))
    same_after_validation(ExecuteFrame, wire(error_frame(PadClosedError("gone"))))


async def test_feed_events_are_the_declared_events() -> None:
    watch = PadWatch("typed")
    subscription = watch.subscribe()
    cell = recorded(1)
    watch.queued(cell)
    watch.started(cell)
    watch.seen([*ITEMS, cell])
    running = watch.state().running
    watch.recorded(cell)
    watch.gone(cell)
    subscription.close()
    sent = [event async for event in subscription]
    assert [event.type for event in sent] == [
        "queued", "started", "progress", "output", "output", "display", "cell",
    ]  # fmt: skip
    for event in sent:
        same_after_validation(FeedFrame, wire(event))
        same_after_validation(CellEvent, wire(event))
    assert running is not None and running.stdout == "out\n"
    resync = Resync(cell=events.running(running, 1, 7))
    same_after_validation(Resync, wire(resync))
    assert wire(resync)["cell"]["status"] == "running"


def test_the_fast_constructors_build_what_pydantic_builds() -> None:
    cell = recorded(3)
    assert events.cell_of(cell) == events.Cell(**cell.to_dict())
    assert events.cell_of(cell, status="killed").status == "killed"
    items: list[tuple[Any, Any, Any]] = [
        (OutputEvent("stderr", "e"), events.FeedOutput(id="c", stream="stderr", text="e"),
         events.OutputFrame(stream="stderr", text="e")),
        (ProgressEvent("p"), events.FeedProgress(id="c", message="p"),
         events.ProgressFrame(message="p")),
        (DisplayEvent({"text/plain": "d"}), events.FeedDisplay(id="c", data={"text/plain": "d"}),
         events.DisplayFrame(data={"text/plain": "d"})),
        (cell, events.FeedCell(cell=events.Cell(**cell.to_dict())),
         events.CellFrame(cell=events.Cell(**cell.to_dict()))),
    ]  # fmt: skip
    for item, feed, frame in items:
        assert events.from_item("c", item) == feed
        assert events.frame_of(item) == frame
        assert wire(events.frame_of(item)) == frame.model_dump()


def test_an_unset_optional_field_is_left_out_and_a_set_one_kept() -> None:
    assert wire(events.ErrorFrame(error="x")) == {"type": "error", "error": "x"}
    assert wire(events.ErrorFrame(error="x", error_type=None)) == {
        "type": "error", "error": "x", "error_type": None,
    }  # fmt: skip
    fitted = {key: value for key, value in recorded(1).to_dict().items() if key != "code"}
    assert "code" not in wire(events.cell_from(fitted))  # a cell whose code did not fit


def test_a_journal_frame_is_its_event_with_its_number_and_generation() -> None:
    cell = recorded(1)
    for event in (
        events.from_item(cell.id, cell),
        events.from_item(cell.id, OutputEvent("stdout", "o")),
        Resync(cell=events.recorded(events.cell_of(cell), 2, 5)),
    ):
        frame = events.numbered(event, 1, 2)
        data = wire(frame)
        assert data == {**wire(event), "seq": 1, "gen": 2}  # flat: the event's fields first
        same_after_validation(JournalFrame, data)
        same_after_validation(CellEvent, {k: v for k, v in data.items() if k not in ("seq", "gen")})
    for event_type, frame_type in events.NUMBERED.items():  # derived, never a copy
        assert issubclass(frame_type, event_type)
        assert list(frame_type.model_fields) == [*event_type.model_fields, "seq", "gen"]
