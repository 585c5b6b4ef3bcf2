"""Helpers for tests that watch processes from the outside, through /proc."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path


def process_gone(pid: int) -> bool:
    """Dead, or a zombie waiting to be reaped (it is not ours to reap). A process with threads
    is gone only once every thread is: its leader shows "Z" while the others still exit."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return True
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
            return False
    return True


async def read_pid(path: Path) -> int:
    """Wait for a child to write its pid into ``path``."""
    while not path.exists() or not path.read_text().strip():  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    return int(path.read_text())


def default_sigint() -> None:
    """For ``preexec_fn``: a child that a test will Ctrl-C starts with SIGINT at its default,
    even where the tests run in the background (there it starts ignored, and is inherited)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def host_pid(root: int, inner: int) -> int:
    """The pid this process knows for the process ``inner`` names itself inside the PID
    namespace of ``root``'s descendants (a pad's kernel and what it starts live in one);
    ``inner`` itself when they share this process's namespace."""
    from scratchpad.runtime.proctree import descendants

    for pid in (root, *descendants(root)):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        ids = next(
            (line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), []
        )
        if ids and int(ids[-1]) == inner:
            return pid
    return inner


def kernel_pid(pad: object) -> int:
    """The pid of a local pad's kernel process itself (not its launcher), as seen from here."""
    from scratchpad.runtime.local import LocalRuntime

    assert isinstance(pad, LocalRuntime) and pad.kernel is not None and pad.pid is not None
    return host_pid(pad.pid, int(pad.kernel.ready["pid"]))


def processes_in(directory: Path) -> list[int]:
    """The live processes whose working directory lies in ``directory`` (a pad's kernel
    works in its workspace, whatever pid its namespace gives it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if (cwd == directory or directory in cwd.parents) and not process_gone(int(entry.name)):
            found.append(int(entry.name))
    return found
