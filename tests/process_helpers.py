"""Helpers for tests that watch processes from the outside, through /proc."""

from __future__ import annotations

import asyncio
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
