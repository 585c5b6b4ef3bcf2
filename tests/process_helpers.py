"""Helpers for tests that watch processes from the outside, through /proc."""

from __future__ import annotations

import asyncio
from pathlib import Path


def process_gone(pid: int) -> bool:
    """Dead, or a zombie waiting for init to reap it (it is not ours to reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


async def read_pid(path: Path) -> int:
    """Wait for a child to write its pid into ``path``."""
    while not path.exists() or not path.read_text().strip():  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    return int(path.read_text())
