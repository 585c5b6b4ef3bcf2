"""A cell can write frames to its kernel's control channel; what it forges affects only its own
cell: never another caller's cell, never the answers of later cells, never the server.

Each test runs the forgery in a real kernel, the way a hostile cell would: it writes to the
channel's fd (``KERNEL.ctrl_out``; the same fd is on the kernel's command line).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.runtime.base import ScratchpadRuntime
from scratchpad.runtime.cell import Cell, DisplayEvent, ProgressEvent
from scratchpad.runtime.inkernel.protocol import HEADER, encode
from scratchpad.runtime.manager import ScratchpadManager
from tests.images import MAKE_PNG
from tests.runtime.test_misbehaving_cells import assert_healthy

KERNEL = "__import__('sys').modules['_scratchpad_kernel'].KERNEL"
# In a cell: wait until the server has sent the kernel its next message (the next cell).
AWAIT_NEXT = f"import select\nselect.select([{KERNEL}.ctrl_in], [], [], 10)\n"
MIB = 1 << 20


def forge(frame: bytes) -> str:
    """Cell code that writes ``frame`` to the kernel's control channel."""
    return f"import os\nos.write({KERNEL}.ctrl_out, {frame!r})\n"


def done(cell_id: str, result: str) -> bytes:
    return encode({"type": "done", "id": cell_id, "status": "ok", "result": result, "error": None})


async def test_a_forged_done_for_its_own_cell_moves_no_answer_onto_the_next_cell(
    pad: ScratchpadRuntime,
) -> None:
    """The forger chooses its own cell's answer; its real one, sent once the next caller's
    cell is on its way, is never taken as that cell's."""
    code = forge(done("x1", "'chosen'")) + AWAIT_NEXT + "'real x'"
    forged = await pad.execute(code, cell_id="x1")
    assert forged.result == "'chosen'"
    next_cell = await pad.execute("'y'")  # another caller's; the kernel is still in x1
    assert (next_cell.status, next_cell.result) == ("ok", "'y'")
    await assert_healthy(pad)


async def test_a_second_done_is_never_the_next_cells_answer(pad: ScratchpadRuntime) -> None:
    code = forge(done("x1", "'first'") + done("x1", "'second'")) + AWAIT_NEXT + "'real x'"
    cells = [await pad.execute(code, cell_id="x1")]
    cells += [await pad.execute(f"'{name}'") for name in ("y", "z")]
    assert [cell.result for cell in cells] == ["'first'", "'y'", "'z'"]


async def test_a_forged_done_for_another_cell_ends_only_its_sender(
    pad: ScratchpadRuntime,
) -> None:
    await pad.execute("kept = 1")
    code = forge(done("someone-else", "'chosen'")) + AWAIT_NEXT + "'real x'"
    forged = await pad.execute(code)
    next_cell = await pad.execute("'y'")
    assert forged.status == "error" and forged.result is None
    assert forged.error is not None
    assert forged.error.startswith("The kernel sent a 'done' frame for another cell: a cell ")
    assert "wrote to the kernel's control channel; the cell was ended" in forged.error
    assert "variables are kept" in forged.error
    assert (next_cell.status, next_cell.result) == ("ok", "'y'")
    assert (await pad.execute("kept")).result == "1"


async def test_a_forger_that_ignores_the_interrupt_is_killed_and_told_why(
    pad: ScratchpadRuntime,
) -> None:
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        + forge(done("someone-else", "'chosen'"))
        + "time.sleep(60)"
    )
    cell = await pad.execute(code)
    assert cell.status == "killed"
    assert cell.error is not None
    assert cell.error.startswith(
        "The kernel sent a 'done' frame for another cell: a cell wrote to the kernel's control "
        "channel; the cell was ended; it did not stop when interrupted, so the kernel was "
        "killed and restarted. What this cell changed was lost. The new kernel restores the "
        "variables saved after the last finished cell from the checkpoint"
    )
    await assert_healthy(pad)


async def test_a_frame_of_garbage_json_ends_only_its_cell(pad: ScratchpadRuntime) -> None:
    await pad.execute("kept = 1")
    cell = await pad.execute(forge(HEADER.pack(9) + b"{not json") + "'x'")
    assert cell.status == "error"
    assert cell.error is not None and cell.error.startswith("The kernel sent a frame that is not")
    assert "variables are kept" in cell.error
    assert (await pad.execute("kept")).result == "1"
    await assert_healthy(pad)


async def test_garbage_from_earlier_code_loses_only_the_answer_of_the_cell_it_hid(
    pad: ScratchpadRuntime,
) -> None:
    """The forger's code, still running after its forged ``done``, writes garbage while the
    next cell waits: that cell's frames are skipped with the garbage, and it says so."""
    code = forge(done("x1", "'chosen'")) + AWAIT_NEXT + forge(b"\xff" * 8)
    assert (await pad.execute(code, cell_id="x1")).result == "'chosen'"
    hidden = await pad.execute("print('y ran')\nkept = 2\n'y'")
    assert (hidden.status, hidden.result, hidden.stdout) == ("error", None, "y ran\n")
    assert hidden.error is not None
    assert hidden.error.startswith(
        "The cell ran, but its answer was lost: the kernel sent a frame of 4,294,967,295 bytes"
    )
    assert (await pad.execute("kept")).result == "2"


async def test_a_400_megabyte_frame_is_never_held_and_other_pads_keep_running(
    workspace: Path, settings: Settings
) -> None:
    """The header announces 400 MB and the cell streams all of it (ignoring the interrupt):
    the server's memory stays flat, another pad answers meanwhile, the cell ends with an
    error that says what happened, and the pad keeps its state."""
    patient = settings.model_copy(update={"interrupt_grace_s": 60.0})
    async with ScratchpadManager(workspace=workspace, settings=patient) as manager:
        pad = await manager.get_or_create("sender")
        other = await manager.get_or_create("other")
        await pad.execute("kept = 1")
        code = (
            "import signal\n"
            "old = signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            + forge(HEADER.pack(400_000_000))
            + f"chunk = b'x' * {MIB}\n"
            "for _ in range(400 * 1024 * 1024 // len(chunk)):\n"
            f"    os.write({KERNEL}.ctrl_out, chunk)\n"
            "signal.signal(signal.SIGINT, old)\n"
            "'streamed'"
        )
        before = rss()
        peak = before
        sender = asyncio.create_task(pad.execute(code, estimated_seconds=120))
        answered_meanwhile = 0
        while not sender.done():
            peak = max(peak, rss())
            cell = await other.execute("6 * 7")
            assert (cell.status, cell.result) == ("ok", "42")
            answered_meanwhile += not sender.done()
        cell = await sender
        assert peak - before < 64 * MIB, f"the server grew by {(peak - before) >> 20} MiB"
        assert answered_meanwhile > 0
        assert cell.status == "error", cell.error
        assert cell.error is not None
        assert cell.error.startswith("The kernel sent a frame of 400,000,000 bytes, over the ")
        assert "the cell was ended (interrupted; variables are kept)" in cell.error
        assert (await pad.execute("kept")).result == "1"
        await assert_healthy(pad)


def rss() -> int:
    """This process's resident memory, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def test_a_display_too_big_for_a_frame_becomes_a_note(
    workspace: Path, settings: Settings
) -> None:
    roomy = settings.model_copy(update={"display_cap_bytes": 256 * MIB})  # not the server's cap
    async with ScratchpadManager(workspace=workspace, settings=roomy) as manager:
        pad = await manager.get_or_create("shows")
        code = (
            "class Big:\n"
            "    def _repr_html_(self):\n"
            f"        return 'x' * {17 * MIB}\n"
            "class Many:\n"
            "    def _repr_json_(self):\n"
            "        return list(range(200_000))\n"
            "display(Big(), Many())\n"
            "'after'"
        )
        cell = await pad.execute(code)
        assert (cell.status, cell.result) == ("ok", "'after'"), cell.error
        notes = [bundle["text/plain"] for bundle in cell.outputs]
        assert notes[0].startswith("[a display (text/html, text/plain) was dropped: as a frame")
        assert notes[0].endswith(" bytes, over the 16 MiB frame cap]")
        assert notes[1].startswith("[a display (application/json, text/plain) was dropped: ")
        assert notes[1].endswith(" bytes with more than 100,000 JSON values]")
        await assert_healthy(pad)


async def test_a_forged_result_note_stays_within_the_cap_of_a_message(
    pad: ScratchpadRuntime,
) -> None:
    """A ``result`` frame's ``text/plain`` is the kernel's note of a form it dropped: one
    forged with 8 MiB of it adds one message-sized line to the cell's logs, not 8 MiB."""
    note = encode({"type": "result", "id": "r1", "data": {"text/plain": "N" * (8 * MIB)}})
    cell = await pad.execute(forge(note) + "'x'", cell_id="r1")
    assert (cell.status, cell.result) == ("ok", "'x'"), cell.error
    assert cell.logs.startswith("result: NNN")
    assert len(cell.logs) < 5_000
    await assert_healthy(pad)


async def test_data_nested_to_the_decoders_depth_is_dropped_with_a_note(
    pad: ScratchpadRuntime,
) -> None:
    """A display or result whose JSON nests 900 lists deep (the kernel encodes it, the
    decoder takes it) is left out saying why; the server's cleaning never recurses into it."""
    code = (
        "class Deep:\n"
        "    def _repr_json_(self):\n"
        "        value = []\n"
        "        for _ in range(900):\n"
        "            value = [value]\n"
        "        return value\n"
        "display(Deep())\n"
        "Deep()"
    )
    cell = await pad.execute(code)
    assert cell.status == "ok", cell.error
    assert [bundle["text/plain"] for bundle in cell.outputs] == [
        "[a display was dropped: its data nests more than 100 levels deep]"
    ]
    assert cell.result_data == {}
    assert "result: its rich forms were left out: its data nests more than 100 levels" in (
        cell.logs
    )
    await assert_healthy(pad)


async def test_large_displays_arrive_whole_and_in_order(pad: ScratchpadRuntime) -> None:
    """A large frame is decoded on a thread, and the frames after it wait for it; text full of
    JSON punctuation is not taken for structure."""
    code = MAKE_PNG + (
        "import base64\n"
        "png = base64.b64encode(png(512, 1024, seed=7)).decode()\n"
        "class Shown:\n"
        "    def _repr_png_(self):\n"
        "        return base64.b64decode(png)\n"
        "    def _repr_html_(self):\n"
        "        return '<p>[1, {2}], ' * 100_000\n"
        "progress('before')\n"
        "display(Shown())\n"
        "progress('after')\n"
        "display('small')\n"
        "len(png)"
    )
    items = [item async for item in pad.execute_streaming(code)]
    cell = items[-1]
    assert isinstance(cell, Cell) and cell.status == "ok", cell
    kinds = [
        item.message if isinstance(item, ProgressEvent) else sorted(item.data)
        for item in items
        if isinstance(item, (ProgressEvent, DisplayEvent))
    ]
    assert kinds == ["before", ["image/png", "text/html", "text/plain"], "after", ["text/plain"]]
    bundle = cell.outputs[0]
    assert len(bundle["image/png"]) == int(cell.result or 0)
    assert bundle["text/html"] == "<p>[1, {2}], " * 100_000


async def test_forged_answers_between_cells_are_not_taken_for_the_real_ones(
    manager: ScratchpadManager, wheel: Path
) -> None:
    """A thread a cell left behind keeps forging "already installed" and "done" answers: the
    install still happens, and the import that follows finds the package."""
    pad = await manager.get_or_create("inst")
    answers = encode({"type": "installed", "names": ["sp_demo_pkg"]}) + encode({"type": "ack"})
    code = (
        "import os, threading\n"
        "stop = threading.Event()\n"
        "def forge():\n"
        "    while not stop.wait(0.002):\n"
        f"        os.write({KERNEL}.ctrl_out, {answers!r})\n"
        "threading.Thread(target=forge, daemon=True).start()"
    )
    assert (await pad.execute(code)).status == "ok"
    output = await pad.install_packages([str(wheel)])
    assert "Already installed" not in output
    cell = await pad.execute("stop.set()\nimport sp_demo_pkg\nsp_demo_pkg.VERSION")
    assert (cell.status, cell.result) == ("ok", "'1.0'"), cell.error


async def test_a_cell_that_fills_its_own_control_input_cannot_hang_the_server(
    settings: Settings, workspace: Path, scratch: Path
) -> None:
    """The cell fills the pipe the server writes the kernel's messages into and stays busy:
    the server's next message to that kernel waits, and nothing else does. (A root server's
    pad runs as another user and cannot even reopen that pipe: the attack needs a pad of the
    server's own user, Landlock alone here.)"""
    same_user = settings.model_copy(update={"namespaces": "off"})
    async with ScratchpadManager(workspace=workspace, settings=same_user) as manager:
        await fill_own_input(manager, scratch)


async def fill_own_input(manager: ScratchpadManager, scratch: Path) -> None:
    pad = await manager.get_or_create("filler")
    other = await manager.get_or_create("other")
    go, gave_up = scratch / "go", scratch / "gave-up"
    code = (
        "import os, time\n"
        f"fd = os.open('/proc/self/fd/' + str({KERNEL}.ctrl_in), os.O_WRONLY | os.O_NONBLOCK)\n"
        "try:\n"
        "    while True:\n"
        "        os.write(fd, b'\\0' * 4096)\n"
        "except BlockingIOError:\n"
        "    pass\n" + forge(done("x1", "'chosen'")) + "deadline = time.monotonic() + 10\n"
        f"while not os.path.exists({str(go)!r}) and time.monotonic() < deadline:\n"
        "    time.sleep(0.01)\n"
        f"if not os.path.exists({str(go)!r}):\n"
        f"    open({str(gave_up)!r}, 'w').close()\n"
    )
    assert (await pad.execute(code, cell_id="x1")).result == "'chosen'"
    waiting = asyncio.create_task(pad.execute("'y'"))  # its message cannot be written yet
    cell = await other.execute("6 * 7")
    assert cell.result == "42"
    assert not gave_up.exists(), "the server was stuck until the cell gave up"
    assert not waiting.done()
    go.touch()
    await waiting  # whatever the kernel makes of the zeros the cell left in its input
    await assert_healthy(pad)
