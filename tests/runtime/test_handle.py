"""Cell handles (runtime/handle.py): start a cell without waiting, look at it, follow it, find
it again by id, cancel it."""

from __future__ import annotations

from scratchpad import events
from scratchpad.runtime.cell import Cell
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.wire import wire


async def test_a_started_cell_is_peeked_followed_waited_for_and_found_again(
    manager: ScratchpadManager,
) -> None:
    pad = await manager.get_or_create("h")
    code = "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)\n'done'"
    handle = await pad.start_cell(code, cell_id="handled")
    assert handle.id == "handled"
    peeked = await handle.peek()
    assert isinstance(peeked, (events.QueuedCell, events.RunningCell))  # typed, not a dict
    assert peeked.id == "handled" and peeked.gen == 1 and peeked.last_seq
    assert await handle.wait(timeout=0.01) is None  # still running: no exception
    frames = [frame async for frame in handle.events()]
    assert [f.seq for f in frames] == list(range(1, len(frames) + 1))
    assert "".join(getattr(f.event, "text", "") for f in frames) == "0\n1\n2\n"
    cell = await handle.wait(timeout=30)
    assert isinstance(cell, Cell) and cell.result == "'done'"
    again = await pad.cell("handled")
    assert await again.peek() == cell
    late = [f.seq async for f in again.events(after=frames[-2].seq)]
    assert late == [frames[-1].seq]  # only what came after


async def test_a_handle_cancels_its_cell(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("h")
    handle = await pad.start_cell("import time\nprint('on', flush=True)\ntime.sleep(30)")
    async for frame in handle.events():
        if frame.event.type == "output":
            break
    assert await handle.cancel()
    cell = await handle.wait(timeout=30)
    assert cell is not None and cell.status == "cancelled"


async def test_a_handle_left_behind_gets_a_resync_of_the_shape_the_route_sends(
    manager: ScratchpadManager,
) -> None:
    pad = await manager.get_or_create("h")
    handle = await pad.start_cell("for i in range(5):\n    print(i, flush=True)", cell_id="gone")
    handle.journal.max_frames = 2  # the ring keeps the last two frames only
    cell = await handle.wait(timeout=30)
    assert cell is not None
    frames = [frame async for frame in handle.events()]
    assert [frame.event.type for frame in frames] == ["resync"]
    (frame,) = frames
    assert isinstance(frame.event, events.Resync)
    standing = frame.event.cell
    assert isinstance(standing, events.RecordedCell) and standing.stdout == "0\n1\n2\n3\n4\n"
    sent = wire(frame.numbered())  # what GET .../cells/{id}/events would send
    assert sent["type"] == "resync" and sent["seq"] == standing.last_seq == frame.seq
    assert sent["cell"]["status"] == "ok" and sent["cell"]["gen"] == sent["gen"]
