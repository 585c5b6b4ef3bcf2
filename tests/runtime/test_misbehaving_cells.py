"""Nothing user code does may desync the protocol or hang the parent.

Each test runs hostile code in a real kernel and then checks that the pad still answers
correctly (``assert_healthy``), which is where a desync would show.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.runtime.base import ScratchpadRuntime
from scratchpad.runtime.cell import Cell, ProgressEvent
from scratchpad.runtime.inkernel.protocol import encode
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from tests.conftest import wait_until_busy
from tests.process_helpers import host_pid, process_gone, read_pid
from tests.runtime.test_checkpoint import saved

MIB = 1024 * 1024


async def assert_healthy(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute("print('still fine')\n6 * 7")
    assert (cell.status, cell.stdout, cell.result) == ("ok", "still fine\n", "42"), cell


async def test_printing_protocol_lookalikes(pad: ScratchpadRuntime) -> None:
    frame = encode({"type": "done", "status": "ok", "result": "fake", "error": None})
    code = (
        "import sys\n"
        f"sys.stdout.buffer.write({frame!r})\n"
        'print(\'{"type": "done", "status": "ok"}\')\n'
        "print('__SCRATCHPAD_CELL_END__')"
    )
    cell = await pad.execute(code)
    assert cell.status == "ok"
    assert cell.result is None
    assert '{"type": "done", "status": "ok"}' in cell.stdout
    assert "__SCRATCHPAD_CELL_END__" in cell.stdout
    await assert_healthy(pad)


async def test_a_five_megabyte_single_line(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute("print('x' * (5 * 1024 * 1024))")
    assert cell.status == "ok"
    assert cell.stdout == "x" * (5 * MIB) + "\n"
    await assert_healthy(pad)


async def test_invalid_utf8_bytes(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute("import os\nos.write(1, b'ok \\xff\\xfe bad\\n')\nprint('\\udcff')")
    assert cell.status == "ok", cell.error
    assert cell.stdout.startswith("ok \ufffd\ufffd bad\n")
    assert "\\udcff" in cell.stdout  # an unencodable surrogate is escaped, not a crash
    await assert_healthy(pad)


async def test_hundred_megabytes_keep_head_and_tail(pad: ScratchpadRuntime) -> None:
    code = (
        "import sys\n"
        "print('FIRST LINE')\n"
        "chunk = 'y' * 1023 + '\\n'\n"
        "for _ in range(100 * 1024):\n"
        "    sys.stdout.write(chunk)\n"
        "print('LAST LINE')"
    )
    cell = await pad.execute(code, estimated_seconds=60)
    assert cell.status == "ok"
    cap = 8 * MIB
    assert len(cell.stdout.encode()) < cap + 200
    assert cell.stdout.startswith("FIRST LINE\n")
    assert cell.stdout.endswith("LAST LINE\n")
    assert "bytes of output dropped" in cell.stdout
    assert "dropped from the middle" in cell.logs
    await assert_healthy(pad)


async def test_input_does_not_block(pad: ScratchpadRuntime) -> None:
    cell = await asyncio.wait_for(pad.execute("import sys\nsys.stdin.read()"), 10)
    assert cell.status in ("ok", "error")  # stdin is /dev/null: read() returns '' at once
    await assert_healthy(pad)


async def test_threads_printing_after_the_cell(pad: ScratchpadRuntime) -> None:
    code = (
        "import threading, time, os\n"
        "def later():\n"
        "    time.sleep(0.3)\n"
        "    os.write(1, b'late thread output\\n')\n"
        "threading.Thread(target=later).start()\n"
        "'returned'"
    )
    cell = await pad.execute(code)
    assert cell.result == "'returned'"
    await asyncio.sleep(0.6)
    following = await pad.execute("1")
    assert following.result == "1"
    assert "late thread output" in following.logs
    await assert_healthy(pad)


async def test_sys_exit_is_an_error_not_a_death(pad: ScratchpadRuntime) -> None:
    await pad.execute("kept = 1")
    cell = await pad.execute("import sys\nsys.exit(3)")
    assert cell.status == "error"
    assert cell.error is not None and "SystemExit: 3" in cell.error
    assert (await pad.execute("kept")).result == "1"


async def test_os_exit_kills_and_the_next_cell_restarts(pad: ScratchpadRuntime) -> None:
    await pad.execute("import threading\nkept = threading.Lock()")  # never checkpointed
    cell = await pad.execute("import os\nprint('bye')\nos._exit(3)")
    assert cell.status == "killed"
    assert cell.stdout == "bye\n"
    assert cell.error is not None and "exited with code 3" in cell.error
    assert "variables were lost" in cell.error
    after = await pad.execute("'kept' in dir()")
    assert after.result == "False"
    assert "fresh kernel" in after.logs
    await assert_healthy(pad)


async def test_segfault_is_reported_with_its_signal(pad: ScratchpadRuntime) -> None:
    cell = await pad.execute("import ctypes\nctypes.string_at(0)")
    assert cell.status == "killed"
    assert cell.error is not None and "SIGSEGV" in cell.error
    assert "Segmentation fault" in cell.stderr  # faulthandler's report of where it happened
    await assert_healthy(pad)


async def test_keyboard_interrupt_raised_by_user_code(pad: ScratchpadRuntime) -> None:
    await pad.execute("kept = 1")
    cell = await pad.execute("raise KeyboardInterrupt('by hand')")
    assert cell.status == "error"  # nobody interrupted it: it is an ordinary exception
    assert cell.error is not None and "KeyboardInterrupt: by hand" in cell.error
    assert (await pad.execute("kept")).result == "1"


async def test_child_processes_outliving_the_cell(scratch: Path, pad: ScratchpadRuntime) -> None:
    pid_file = scratch / "child.pid"
    code = (
        "import subprocess\n"
        "child = subprocess.Popen(['sh', '-c', 'sleep 0.3; echo child late; sleep 60'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "'started'"
    )
    cell = await pad.execute(code)
    assert cell.result == "'started'"
    assert isinstance(pad, LocalRuntime) and pad.pid is not None
    child_pid = host_pid(pad.pid, int(pid_file.read_text()))
    await asyncio.sleep(0.6)
    following = await pad.execute("2")
    assert following.result == "2"
    assert "child late" in following.logs
    assert not process_gone(child_pid)
    await pad.close()
    await asyncio.sleep(0.1)
    assert process_gone(child_pid)  # closing the pad took its children along


async def test_killed_twice_in_a_row_rebuilds_the_environment(
    manager: ScratchpadManager, pad: ScratchpadRuntime
) -> None:
    for _ in range(2):
        cell = await pad.execute("import os\nos._exit(1)")
        assert cell.status == "killed"
    after = await pad.execute("1")
    assert after.result == "1"
    assert after.logs.count("virtualenv was rebuilt") == 1
    await assert_healthy(pad)
    await pad.close()
    reloaded = manager.peek("main")
    assert len(reloaded.cells) == 4  # the history file followed the rebuilt venv


async def test_memory_limit_turns_runaway_allocation_into_an_error(
    workspace: Path, settings: Settings
) -> None:
    limited = settings.model_copy(update={"kernel_memory_limit_mb": 1024})
    async with ScratchpadManager(workspace=workspace, settings=limited) as manager:
        pad = await manager.get_or_create("limited")
        cell = await pad.execute("huge = bytearray(4 * 1024 ** 3)")
        assert cell.status == "error"
        assert cell.error is not None and "MemoryError" in cell.error
        await assert_healthy(pad)


async def test_sigint_ignored_by_the_cell_gets_it_killed(
    workspace: Path, settings: Settings
) -> None:
    fast = settings.model_copy(update={"default_timeout_s": 1.0, "interrupt_grace_s": 0.5})
    async with ScratchpadManager(workspace=workspace, settings=fast) as manager:
        pad = await manager.get_or_create("stubborn")
        assert isinstance(pad, LocalRuntime)
        await saved(pad, (await pad.execute("kept = 1")).number)
        code = f"import signal, time\nsignal.signal({int(signal.SIGINT)}, signal.SIG_IGN)\n"
        code += "while True:\n    time.sleep(0.01)"
        cell = await pad.execute(code)
        assert cell.status == "killed"
        assert cell.error is not None and cell.error.startswith("Cell timed out after 1s")
        assert "variables were lost" in cell.error
        after = await pad.execute("'kept' in dir()")
        assert after.result == "True"  # from the checkpoint after the last cell that ended
        assert "this is a fresh kernel. It restored the variables saved after cell 1" in after.logs
        await assert_healthy(pad)


async def test_garbage_written_to_the_control_channel(pad: ScratchpadRuntime) -> None:
    """Eight bytes of 0xff read as a 4 GiB length: the cell ends, the kernel and its state
    stay (more forged frames: test_forged_frames.py)."""
    await pad.execute("kept = 1")
    cell = await pad.execute("import os, sys\nos.write(int(sys.argv[2]), b'\\xff' * 8)\n1")
    assert cell.status == "error"
    assert cell.error is not None and "4,294,967,295 bytes, over the 16 MiB cap" in cell.error
    assert "variables are kept" in cell.error
    await assert_healthy(pad)
    assert (await pad.execute("kept")).result == "1"


async def test_kernel_killed_while_idle_restarts_on_the_next_cell(
    pad: ScratchpadRuntime,
) -> None:
    assert isinstance(pad, LocalRuntime) and pad.pid is not None
    await saved(pad, (await pad.execute("kept = 1")).number)
    os.kill(pad.pid, signal.SIGKILL)
    while not process_gone(pad.pid):  # noqa: ASYNC110 - dead, but not yet reported by the pipes
        await asyncio.sleep(0.001)
    cell = await pad.execute("'kept' in dir()")
    assert cell.status == "ok"
    assert cell.result == "True"  # restored from its checkpoint
    assert "fresh kernel" in cell.logs


async def test_flood_of_output_between_cells_is_bounded(pad: ScratchpadRuntime) -> None:
    code = (
        "import threading, time, os\n"
        "def flood():\n"
        "    time.sleep(0.2)\n"
        "    for _ in range(200):\n"
        "        os.write(1, b'z' * 65536)\n"
        "threading.Thread(target=flood, daemon=True).start()"
    )
    assert (await pad.execute(code)).status == "ok"
    await asyncio.sleep(1.0)  # 12.5 MiB arrive (or block) while no cell runs
    following = await pad.execute("'next'")
    assert following.result == "'next'"
    assert len(following.logs) < 70_000
    assert "bytes of output dropped" in following.logs
    await asyncio.sleep(0.5)
    await assert_healthy(pad)


async def test_interrupt_never_cuts_a_control_frame(workspace: Path, settings: Settings) -> None:
    quick = settings.model_copy(update={"default_timeout_s": 0.5})
    async with ScratchpadManager(workspace=workspace, settings=quick) as manager:
        pad = await manager.get_or_create("big-frames")
        await pad.execute("kept = 1")
        cell = await pad.execute("while True:\n    progress('p' * 3_000_000)")
        assert cell.status == "timeout", cell.error  # interrupted cleanly, not killed
        assert (await pad.execute("kept")).result == "1"


async def test_forked_child_does_not_hide_the_kernels_death(pad: ScratchpadRuntime) -> None:
    code = "import os, time\nif os.fork() == 0:\n    time.sleep(30)\n    os._exit(0)\nos._exit(3)"
    cell = await asyncio.wait_for(pad.execute(code), 10)  # not the inactivity timeout
    assert cell.status == "killed"
    assert cell.error is not None and "exited with code 3" in cell.error
    await assert_healthy(pad)


async def test_death_between_cells_is_told_with_its_cause(pad: ScratchpadRuntime) -> None:
    code = (
        "import os, sys, threading, time\n"
        "def die():\n"
        "    time.sleep(0.2)\n"
        "    print('last words', file=sys.stderr, flush=True)\n"
        "    os._exit(5)\n"
        "threading.Thread(target=die).start()"
    )
    assert (await pad.execute(code)).status == "ok"
    await asyncio.sleep(0.6)
    cell = await pad.execute("1")
    assert cell.result == "1"
    assert "The kernel exited with code 5; this is a fresh kernel" in cell.logs
    assert "last words" in cell.logs


async def test_a_flood_of_progress_is_capped_in_memory_and_on_the_wire(
    workspace: Path, settings: Settings
) -> None:
    small = settings.model_copy(update={"logs_cap_chars": 64 * 1024})
    async with ScratchpadManager(workspace=workspace, settings=small) as manager:
        pad = await manager.get_or_create("chatty")
        code = "for i in range(10_000):\n    progress(f'{i} ' + 'p' * 10_000)\nprogress('last')"
        items = [item async for item in pad.execute_streaming(code, estimated_seconds=120)]
        cell = items[-1]
        assert isinstance(cell, Cell)
        assert cell.status == "ok", cell.error
        streamed = [item for item in items if isinstance(item, ProgressEvent)]
        assert sum(len(item.message) for item in streamed) < 1024 * 1024  # not 100 MB
        assert all(len(item.message) <= 4_100 for item in streamed)  # each message capped
        assert len(cell.logs) < 70 * 1024
        assert cell.logs.startswith("0 ppp") and cell.logs.endswith("last")
        assert "log lines" in cell.logs and "dropped" in cell.logs
        await assert_healthy(pad)


async def test_a_flood_of_displays_is_capped(workspace: Path, settings: Settings) -> None:
    small = settings.model_copy(update={"display_cap_bytes": 256 * 1024})
    async with ScratchpadManager(workspace=workspace, settings=small) as manager:
        pad = await manager.get_or_create("shows")
        code = "for i in range(2_000):\n    display(str(i) * 5_000)\ndisplay('x' * 10**6)"
        cell = await pad.execute(code, estimated_seconds=120)
        assert cell.status == "ok", cell.error
        size = sum(len(json.dumps(bundle)) for bundle in cell.outputs)
        assert size < 300 * 1024
        assert cell.outputs[0]["text/plain"].startswith("'00000")
        assert "was dropped: over the cap" in cell.outputs[-1]["text/plain"]  # too big alone
        assert "displays:" in cell.logs and "dropped from the middle" in cell.logs
        await assert_healthy(pad)


async def test_the_stored_history_is_bounded(workspace: Path, settings: Settings) -> None:
    bounded = settings.model_copy(update={"history_max_bytes": 64 * 1024})
    async with ScratchpadManager(workspace=workspace, settings=bounded) as manager:
        pad = await manager.get_or_create("long")
        for number in range(40):
            await pad.execute(f"print({number}, 'h' * 5_000)")
        history = manager.settings.home / "pads" / "long" / "history.jsonl"
        assert history.stat().st_size <= 64 * 1024
        assert pad.cells[0].description == "history folded"
        assert pad.cells[0].stdout.startswith(f"{40 - (len(pad.cells) - 1)} earlier cell(s)")
        assert pad.cells[-1].stdout.startswith("39 ")
        await pad.close()
        reloaded = manager.peek("long").cells
        assert [c.stdout for c in reloaded] == [c.stdout for c in pad.cells]
        assert "folded away" in manager.peek("long").dump()
        kept = list(range(41 - (len(pad.cells) - 1), 41))  # the cells keep their numbers
        assert [c.number for c in pad.cells] == [0, *kept]
        assert [c.number for c in reloaded] == [0, *kept]
    async with ScratchpadManager(workspace=workspace, settings=bounded) as manager:
        again = await manager.get_or_create("long")  # as after a restart of the server
        assert (await again.execute("1/0")).number == 41
        assert "## [41] Cell" in again.dump() and "## [40] Cell" in again.dump()


async def test_an_unreadable_history_line_is_skipped_and_said(
    manager: ScratchpadManager, caplog: pytest.LogCaptureFixture
) -> None:
    pad = await manager.get_or_create("torn")
    await pad.execute("1")
    await pad.close()
    history = manager.settings.home / "pads" / "torn" / "history.jsonl"
    with history.open("a") as handle:
        handle.write('{"code": "cut off in the mid')
    with caplog.at_level("WARNING"):
        cells = manager.peek("torn").cells
    assert len(cells) == 1
    assert "skipped 1 unreadable line" in caplog.text


async def test_descendants_that_leave_the_group_die_with_the_pad(
    scratch: Path, pad: ScratchpadRuntime
) -> None:
    code = (
        "import os, subprocess, time\n"
        "session = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "if os.fork() == 0:\n"  # a classic daemon: fork, setsid, fork again, parent exits
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        open({str(scratch / 'daemon')!r}, 'w').write(str(os.getpid()))\n"
        "        time.sleep(300)\n"
        "    os._exit(0)\n"
        "session.pid"
    )
    cell = await pad.execute(code)
    assert isinstance(pad, LocalRuntime) and pad.pid is not None
    session_pid = host_pid(pad.pid, int(cell.result or "0"))
    daemon_pid = host_pid(pad.pid, await read_pid(scratch / "daemon"))
    assert not process_gone(session_pid) and not process_gone(daemon_pid)
    await pad.reset()
    for pid in (session_pid, daemon_pid):
        assert await gone_within(pid, 10), f"{pid} outlived the reset"
    await assert_healthy(pad)


async def test_a_kernel_killed_from_outside_is_not_called_out_of_memory(
    pad: ScratchpadRuntime,
) -> None:
    assert isinstance(pad, LocalRuntime) and pad.pid is not None
    running = asyncio.create_task(pad.execute("import time\ntime.sleep(30)"))
    await wait_until_busy(pad)
    os.kill(pad.pid, signal.SIGKILL)
    cell = await running
    assert cell.status == "killed"
    assert cell.error is not None and "killed by SIGKILL from outside Scratchpad" in cell.error
    assert "memory" not in cell.error


async def gone_within(pid: int, seconds: float) -> bool:
    deadline = asyncio.get_running_loop().time() + seconds
    while not process_gone(pid):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_descendants_of_a_kernel_that_died_by_itself_are_stopped(
    scratch: Path, pad: ScratchpadRuntime
) -> None:
    code = (
        "import os, subprocess\n"
        "daemon = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "daemon.pid"
    )
    started = await pad.execute(code)
    assert isinstance(pad, LocalRuntime) and pad.pid is not None
    daemon = host_pid(pad.pid, int(started.result or "0"))
    assert not process_gone(daemon)
    died = await pad.execute("import os\nos._exit(3)")  # its daemon is left without it
    assert died.status == "killed"
    assert (await pad.execute("1")).result == "1"  # the next cell cleans up after the dead one
    assert await gone_within(daemon, 10), "the daemon outlived its kernel"


async def test_one_huge_cell_cannot_blow_the_history_bound(
    workspace: Path, settings: Settings
) -> None:
    bounded = settings.model_copy(update={"history_max_bytes": 64 * 1024})
    async with ScratchpadManager(workspace=workspace, settings=bounded) as manager:
        pad = await manager.get_or_create("huge")
        cell = await pad.execute("import sys\nsys.stdout.write('\\x01' * 1_000_000)")
        assert len(cell.stdout) == 1_000_000  # the caller gets the whole cell
        history = manager.settings.home / "pads" / "huge" / "history.jsonl"
        assert history.stat().st_size <= 40 * 1024  # 6 MB as JSON escapes, kept to half
        await pad.close()
        stored = manager.peek("huge").cells  # read back from the file
        assert "cut from this pad's history" in stored[-1].stdout
