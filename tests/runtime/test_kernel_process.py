"""KernelProcess against misbehaving kernels (tests/kernels/): start failures are clear."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.errors import KernelStartError
from scratchpad.runtime.kernel import KernelProcess, describe_exit
from tests.process_helpers import process_gone, read_pid

KERNELS = Path(__file__).parent.parent / "kernels"


async def spawn(worker: str, timeout: float = 5.0) -> KernelProcess:
    return await KernelProcess.spawn(
        Path(sys.executable),
        cwd=Path.cwd(),
        env=dict(os.environ),
        config={},
        timeout=timeout,
        worker=KERNELS / worker,
    )


async def test_kernel_that_exits_at_boot() -> None:
    with pytest.raises(KernelStartError) as caught:
        await spawn("exit_at_boot.py")
    message = str(caught.value)
    assert "exited with code 7 before it was ready" in message
    assert "this kernel refuses to start" in message


async def test_kernel_that_never_answers() -> None:
    with pytest.raises(KernelStartError, match=r"did not answer within 0.5s"):
        await spawn("never_ready.py", timeout=0.5)


async def test_kernel_that_sends_garbage() -> None:
    with pytest.raises(KernelStartError, match="sent an invalid control frame"):
        await spawn("garbage_frames.py", timeout=30)


async def test_stop_reaps_the_real_worker() -> None:
    kernel = await KernelProcess.spawn(
        Path(sys.executable), cwd=Path.cwd(), env=dict(os.environ), config={}, timeout=10
    )
    assert kernel.alive
    assert await kernel.stop(grace=1.0) == 0  # asked politely, exited cleanly
    assert not kernel.alive


@pytest.mark.parametrize(
    ("code", "by_us", "oom", "words"),
    [
        (0, False, False, "exited with code 0"),
        (3, False, False, "exited with code 3"),
        (-signal.SIGSEGV, False, False, "was killed by SIGSEGV"),
        (-signal.SIGKILL, False, False, "was killed by SIGKILL from outside Scratchpad"),
        (-signal.SIGKILL, False, True, "was killed by SIGKILL: out of memory (the OOM killer"),
        (-signal.SIGKILL, True, False, "was killed by SIGKILL"),
    ],
)
def test_describe_exit(code: int, by_us: bool, oom: bool, words: str) -> None:
    """Out of memory only when the cgroup says so: a kill from outside is just that."""
    assert describe_exit(code, by_us, oom).startswith(words)
    if not oom:
        assert "memory" not in describe_exit(code, by_us, oom)


async def test_cancelled_start_leaves_no_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "kernel.pid"
    monkeypatch.setenv("KERNEL_PID_FILE", str(pid_file))
    task = asyncio.create_task(spawn("never_ready.py", timeout=30))
    pid = await read_pid(pid_file)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.1)
    assert process_gone(pid)


async def test_cancelled_tool_run_is_killed(tmp_path: Path) -> None:
    from scratchpad.runtime.venv import run_tool

    pid_file = tmp_path / "tool.pid"
    task = asyncio.create_task(run_tool(["sh", "-c", f"echo $$ > {pid_file}; sleep 30"], 60))
    pid = await read_pid(pid_file)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.1)
    assert process_gone(pid)


def test_a_pad_started_from_a_thread_that_blocks_sigint_can_still_be_interrupted(
    workspace: Path, settings: Settings
) -> None:
    """A signal mask is inherited from the thread that starts a process (a Ray actor's
    thread blocks SIGINT): the kernel clears it, so a cancel interrupts the cell and the
    variables stay, instead of the ladder killing the kernel."""
    from scratchpad.runtime.manager import ScratchpadManager
    from tests.conftest import wait_until_busy

    async def run() -> tuple[str, str | None]:
        async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
            pad = await manager.get_or_create("masked")
            await pad.execute("kept = 1")
            task = asyncio.create_task(pad.execute("while True:\n    kept += 1"))
            await wait_until_busy(pad)
            await pad.cancel()
            cell = await task
            return cell.status, (await pad.execute("kept > 1")).result

    outcome: list[tuple[str, str | None]] = []

    def in_a_masked_thread() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        outcome.append(asyncio.run(run()))

    thread = threading.Thread(target=in_a_masked_thread)
    thread.start()
    thread.join(120)
    assert outcome == [("cancelled", "True")]
