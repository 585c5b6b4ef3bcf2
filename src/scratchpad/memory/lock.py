"""One cycle (or restore, or reset) at a time per agent directory: ``flock`` on ``ROOT/.lock``.

``flock`` belongs to the open file, so the kernel drops it when the holder exits or is
killed: a lock file left by a dead process never blocks the next cycle. The holder's pid is
written into the file while it is held, to make the refusal message and ``is_locked`` useful.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from scratchpad.errors import AgentLockedError


@contextlib.contextmanager
def agent_lock(path: Path) -> Iterator[None]:
    """Hold the lock at ``path`` for the block, or raise AgentLockedError at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AgentLockedError(_refusal(path, fd)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # released: no holder to name
    finally:
        os.close(fd)  # closing the file releases the flock


def _refusal(path: Path, fd: int) -> str:
    holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    who = f"process {holder}" if holder.isdigit() else "another process"
    return (
        f"{path.parent} is busy: {who} holds {path} (a cycle, restore or reset is running). "
        "Wait for it to finish and try again; nothing was written."
    )


def is_locked(path: Path) -> bool:
    """Whether the lock looks held: its file names a live process. Read-only, so it never
    gets in the way of a cycle that is starting (a reused pid can make it say yes)."""
    try:
        holder = path.read_text(encoding="ascii", errors="replace").strip()
    except FileNotFoundError:
        return False
    if not holder.isdigit():
        return False
    try:
        os.kill(int(holder), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, and another user's
    return True
