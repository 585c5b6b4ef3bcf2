"""A pad's limits, on by default, for its whole process tree (README, Trust model): memory
summed over its processes, a process count, a CPU weight, the disk its files take."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.errors import ConfigError, InvalidInputError, PadLimitError
from scratchpad.runtime import confinement, limits, sandboxing
from scratchpad.runtime.limits import MIB, PadLimits
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from tests.process_helpers import kernel_pid
from tests.runtime.attacks import fork_bomb
from tests.runtime.test_checkpoint import saved
from tests.unprivileged import unprivileged

CHILDREN_HOLDING_MEMORY = """
import subprocess, sys
hold = (
    "import time\\nx = b'\\\\1' * (120 * 1024 * 1024)\\n"
    "print('held', flush=True)\\ntime.sleep(60)"
)
children = [
    subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE) for _ in range(5)
]
for child in children:
    child.stdout.readline()
for child in children:  # the cell runs on while they hold it (never ends before a check)
    child.wait()
'all held'
"""


def test_limits_are_on_by_default(settings: Settings) -> None:
    found = PadLimits.from_settings(settings)
    assert found.memory_bytes == limits.machine_memory() // 2
    assert (found.processes, found.disk_bytes) == (512, 10240 * MIB)
    assert 0 < found.nice <= 19


async def test_a_pad_past_its_memory_limit_is_stopped_saying_so(manager: ScratchpadManager) -> None:
    """Five children of 120 MiB each, under a 400 MiB limit: each process is small (a per-
    process limit would let them all be), the tree is not."""
    pad = await manager.get_or_create("hungry", limits={"memory_mb": 400})
    neighbour = await manager.get_or_create("neighbour")
    assert isinstance(pad, LocalRuntime)
    await saved(pad, (await pad.execute("kept = 1")).number)
    cell = await pad.execute(CHILDREN_HOLDING_MEMORY, timeout_s=60)
    assert cell.status == "killed", (cell.result, cell.error)
    assert cell.error is not None
    assert "out of memory: the pad used" in cell.error and "of its 400 MiB limit" in cell.error
    assert "what this cell changed was lost" in cell.error.lower()
    assert (await neighbour.execute("1 + 1")).result == "2"
    after = await pad.execute("'kept' in dir()")
    assert after.result == "True" and "fresh kernel" in after.logs  # from its checkpoint


MEMORY_FILE = """
import mmap, os
fd = os.memfd_create("hoard")
for _ in range(600):
    os.write(fd, b"x" * (1 << 20))  # 600 MiB in no process's resident memory
if {close}:
    kept = mmap.mmap(fd, 4096)  # one page mapped, the descriptor closed
    os.close(fd)
import time
time.sleep(30)
"""


@pytest.mark.parametrize("close", [False, True], ids=["open", "mapped"])
async def test_memory_held_in_a_memory_file_counts(manager: ScratchpadManager, close: bool) -> None:
    """Pages written into a memfd belong to no process: the watchdog counts the files a
    pad's processes hold open or mapped (mapped ones: as root, the server's user here)."""
    pad = await manager.get_or_create("hoarder", limits={"memory_mb": 200})
    cell = await pad.execute(MEMORY_FILE.format(close=close), timeout_s=60)
    assert cell.status == "killed", (cell.stdout, cell.error)
    assert cell.error is not None
    assert "out of memory: the pad used" in cell.error and "of its 200 MiB limit" in cell.error


def check_fork_bomb(seen: object, limit: int) -> None:
    assert isinstance(seen, dict) and seen["status"] == "ok", seen
    assert "refused after" in seen["stdout"] and "BlockingIOError" in seen["stdout"], seen
    assert int(seen["children"]) < limit and seen["beside"] == "2", seen


async def test_a_fork_bomb_stays_inside_its_pad_as_root(tmp_path: Path, settings: Settings) -> None:
    if not confinement.support(settings).namespaces:
        pytest.skip("the process limit is counted for the pad alone in its own user namespace")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    check_fork_bomb(await fork_bomb(tmp_path / "home", workspace, 40), 40)


def test_a_fork_bomb_stays_inside_its_pad_as_a_user() -> None:
    check_fork_bomb(unprivileged("fork_bomb", 40), 40)


async def test_a_pad_runs_at_its_cpu_weight(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("nice", limits={"cpu_weight": 25})
    await pad.execute("1")
    stat = Path(f"/proc/{kernel_pid(pad)}/stat").read_text().rsplit(")", 1)[1].split()
    assert (
        int(stat[16]) == PadLimits.from_settings(manager.settings).changed({"cpu_weight": 25}).nice
    )


async def test_no_file_of_a_pad_is_larger_than_its_disk(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("big", limits={"disk_mb": 20})
    cell = await pad.execute("open('big.bin', 'wb').write(b'x' * (30 * 1024 * 1024))")
    assert cell.status == "error" and "File too large" in (cell.error or "")


async def test_a_pad_past_its_disk_limit_runs_no_more_cells_until_files_go(
    manager: ScratchpadManager, workspace: Path
) -> None:
    pad = await manager.get_or_create("full", limits={"disk_mb": 40})
    assert isinstance(pad, LocalRuntime)
    written = await pad.execute(
        "for n in range(3):\n    open(f'part{n}.bin', 'wb').write(b'x' * (20 * 1024 * 1024))"
    )
    assert written.status == "ok", written.error
    with pytest.raises(
        PadLimitError, match=r"out of disk: the pad's files take 6\d\.\d MiB of its 40"
    ):
        await until_refused(pad)
    for n in range(3):
        (workspace / f"part{n}.bin").unlink()
    assert (await pad.execute("1 + 1")).result == "2"


async def until_refused(pad: LocalRuntime) -> None:
    """Run cells until the pad refuses one (its files are measured after cells, in the
    background); a deadline keeps a failing test from hanging."""
    async with asyncio.timeout(30):
        while True:
            await pad.execute("1")
            await asyncio.sleep(0.2)


async def test_a_cell_filling_the_disk_is_stopped_while_it_runs(
    manager: ScratchpadManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "DISK_EVERY_S", 0.2)
    pad = await manager.get_or_create("filling", limits={"disk_mb": 30})
    cell = await pad.execute(
        "import time\nfor n in range(60):\n"
        "    open(f'chunk{n}.bin', 'wb').write(b'x' * (2 * 1024 * 1024))\n    time.sleep(0.05)",
        timeout_s=60,
    )
    assert cell.status == "killed" and "out of disk" in (cell.error or ""), cell.error
    with pytest.raises(PadLimitError, match="runs no more cells: out of disk"):
        await pad.execute("1")  # until its files go


async def test_a_reset_gives_no_fresh_disk_allowance(manager: ScratchpadManager) -> None:
    """A bound workspace counts what it grew by since the pad first measured it, across
    kernel restarts: writing, resetting and writing again adds up."""
    pad = await manager.get_or_create("resets", limits={"disk_mb": 50})
    assert isinstance(pad, LocalRuntime)
    for n in range(3):
        cell = await pad.execute(f"open('part{n}.bin', 'wb').write(b'q' * (20 * 1024 * 1024))")
        if cell.status != "ok":
            break
        await pad.reset()
    with pytest.raises(PadLimitError, match="out of disk"):
        await until_refused(pad)


async def test_a_pads_own_directory_counts_whole(unbound: ScratchpadManager) -> None:
    """Without a bound workspace, what is in the pad's own directory is all its own."""
    pad = await unbound.get_or_create("own", limits={"disk_mb": 30})
    assert isinstance(pad, LocalRuntime)
    (unbound.workspace_of("own") / "there-before.bin").write_bytes(b"x" * (40 * MIB))
    with pytest.raises(PadLimitError, match="out of disk"):
        await until_refused(pad)


@pytest.fixture
async def unbound(settings: Settings) -> AsyncIterator[ScratchpadManager]:
    manager = ScratchpadManager(settings=settings)
    yield manager
    await manager.close_all()


@pytest.mark.parametrize(
    ("limits", "words"),
    [
        ({"memory_mb": True}, "must be a whole number"),
        ({"memory_mb": 1.5}, "must be a whole number"),
        ({"memory_mb": "100"}, "must be a whole number"),
        ({"memory_mb": -1}, "out of range"),
        ({"memory_mb": 1}, "out of range: give 64.."),
        ({"processes": 1}, "a kernel needs that many to start"),
        ({"disk_mb": 10**30}, "out of range"),
        ({"cpu_weight": 0}, "out of range"),
        ({"memory": 5}, "unknown limit(s) 'memory': give memory_mb"),
    ],
)
async def test_a_bad_limit_is_refused_before_anything_starts(
    manager: ScratchpadManager, limits: dict[str, object], words: str
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        await manager.get_or_create("bad", limits=limits)
    assert words in str(refused.value)
    assert manager.names() == [] and not (manager.settings.home / "pads" / "bad").exists()


async def test_a_bad_limit_leaves_a_running_pad_as_it_was(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("kept", limits={"memory_mb": 500})
    with pytest.raises(InvalidInputError):
        await manager.get_or_create("kept", limits={"processes": 1})
    assert isinstance(pad, LocalRuntime) and pad.limits.memory_bytes == 500 * MIB
    assert (await pad.execute("1 + 1")).result == "2"


def test_without_a_pad_namespace_no_process_limit_is_applied(settings: Settings) -> None:
    """RLIMIT_NPROC counts every process of the user outside a user namespace of the pad's
    own: applied there, it would hold the user's other processes (and other pads) too."""
    paths = sandboxing.PadPaths(
        home=settings.home, workspace=settings.home, root=settings.home, tmp=settings.home
    )
    wanted = {"processes": 512, "nice": 3}
    for changes in ({"sandbox": "off"}, {"namespaces": "off"}):
        spec = confinement.spec(settings.model_copy(update=changes), paths, wanted)
        assert "processes" not in spec["limits"], changes


@pytest.mark.parametrize("user", ["0", "0:0", "root", "65534:0"])
def test_pads_never_run_as_root(settings: Settings, user: str) -> None:
    with pytest.raises(ConfigError, match="is root"):
        confinement.pad_identity(settings.model_copy(update={"pad_user": user}))


async def test_the_server_reports_the_limits(settings: Settings) -> None:
    described = confinement.report(settings)["confinement"]["limits"]
    assert set(described) == {"memory", "processes", "cpu", "disk"}
    assert "watchdog" in described["memory"] and "MiB per pad" in described["disk"]
    assert "memory-only files (memfd)" in described["memory"]
