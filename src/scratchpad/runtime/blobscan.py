"""The blobs a pad's checkpoint just wrote, scanned for the secrets only the server knows
(the kernel refuses what holds its own environment's secrets or a key's shape; the server's
registered secrets it is never told): a blob that holds one is deleted, and the next cell's
logs say which names were not kept. Its restore then reports them as not restored.

The blobs are read as bytes (:func:`checkpoint.held_secret`), never unpickled, on a worker
thread once the kernel's writer has put them on disk (it writes after the cell answered);
the wait for the disk is the event loop's (short looks, no worker thread held meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scratchpad.runtime import checkpoint
from scratchpad.scrub import Scrubber, scrubber

WRITE_WAIT_S = 30.0  # how long a scan waits for the kernel to write what it said it would
POLL_S = (0.004, 0.02)  # how often it looks meanwhile: soon at first (small blobs), then less
BEFORE_CELL_S = 2.0  # how long the next cell waits for the scans before it starts
SETTLE_S = 60.0  # how long a close, sleep, fork or revert waits for them
NOTE_NAMES = 20  # names a note lists
DIGEST = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class NewBlobs:
    """What a checkpoint outcome says it wrote (untrusted: it comes from the kernel)."""

    number: int  # the manifest written after them
    names: dict[str, list[str]]  # blob digest -> the names it holds
    more: bool  # more blobs than listed: every blob is scanned

    @classmethod
    def of(cls, ckpt: object) -> NewBlobs | None:
        if not isinstance(ckpt, dict):
            return None
        blobs, number = ckpt.get("blobs"), ckpt.get("number")
        if not isinstance(blobs, dict) or type(number) is not int:
            return None
        new = blobs.get("new")
        names = {
            digest: [str(name) for name in held if isinstance(name, str)]
            for digest, held in (new.items() if isinstance(new, dict) else ())
            if isinstance(digest, str) and DIGEST.fullmatch(digest) and isinstance(held, list)
        }
        more = blobs.get("more") is True
        return cls(number, names, more) if names or more else None


def written(base: Path, new: NewBlobs) -> bool:
    """Whether the blobs are on disk: all there, or the manifest after them written (the
    missing were never written, or are gone), or no checkpoint is left (a reset)."""
    head = checkpoint.head_number(base)
    if head is not None and head >= new.number:
        return True
    blobs = base / "blobs"
    if not new.more and all((blobs / f"{d}.pkl").exists() for d in new.names):
        return True
    return not base.is_dir()


def scan(root: Path, new: NewBlobs, scrub: Scrubber, clean: set[str]) -> list[str]:
    """Delete the new blobs that hold a secret (blocking; ``clean``: digests found clean
    before, grown here). The names they held."""
    base = checkpoint.directory(root)
    names = dict(new.names)
    if new.more:
        manifest = checkpoint.read_manifest(root) or {}
        entries = manifest.get("vars")
        for name, entry in entries.items() if isinstance(entries, dict) else ():
            blob = entry.get("blob") if isinstance(entry, dict) else None
            if isinstance(blob, str) and blob not in new.names:
                names.setdefault(blob, []).append(str(name))
        for path in (base / "blobs").glob("*.pkl"):
            names.setdefault(path.stem, [])
    dropped: list[str] = []
    for digest, held in names.items():
        path = base / "blobs" / f"{digest}.pkl"
        if digest in clean or path.is_symlink():
            continue
        try:
            if checkpoint.held_secret(path, scrub):
                path.unlink(missing_ok=True)
                dropped += held
            else:
                clean.add(digest)
        except FileNotFoundError:
            continue  # never written, or collected: nothing to scan
    return dropped


class BlobScans:
    """The scans of one pad's new blobs: started after each checkpoint, waited for (briefly)
    before the next cell, and fully before its kernel sleeps, is forked, reverted or closed."""

    def __init__(self, root: Path, tell: Callable[[str], None]) -> None:
        self._root = root
        self._tell = tell  # a line for the next cell's logs
        self._tasks: dict[asyncio.Task[None], asyncio.Event] = {}  # -> its blobs on disk
        self._clean: set[str] = set()  # digests found clean, at ``_version`` of the scrubber
        self._version = -1
        self._stopped = asyncio.Event()  # set when the kernel that writes them stops

    def start(self, ckpt: object) -> None:
        """Scan what a checkpoint outcome says it wrote (nothing new: nothing to do)."""
        new = NewBlobs.of(ckpt)
        if new is None:
            return
        scrub = scrubber()
        if scrub.version != self._version:
            self._clean, self._version = set(), scrub.version
        seen = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._scan(new, scrub, seen))
        self._tasks[task] = seen
        task.add_done_callback(lambda done: self._tasks.pop(done, None))

    async def _scan(self, new: NewBlobs, scrub: Scrubber, seen: asyncio.Event) -> None:
        try:
            await self._written(new)
            seen.set()
            dropped = await asyncio.to_thread(scan, self._root, new, scrub, self._clean)
        except OSError as exc:
            self._tell(f"the checkpoint could not be checked for secrets ({exc})")
            return
        for name in dropped[:NOTE_NAMES]:
            self._tell(f"{name}: not kept (it held a secret)")
        if len(dropped) > NOTE_NAMES:
            self._tell(f"and {len(dropped) - NOTE_NAMES} more names: not kept (a secret)")

    async def _written(self, new: NewBlobs) -> None:
        """Until the blobs are on disk, the kernel that writes them stopped, or the deadline."""
        stopped = self._stopped
        base = checkpoint.directory(self._root)
        deadline = asyncio.get_running_loop().time() + WRITE_WAIT_S
        pause, longest = POLL_S
        while (left := deadline - asyncio.get_running_loop().time()) > 0:
            with contextlib.suppress(TimeoutError):  # first: the writer has only just begun
                await asyncio.wait_for(stopped.wait(), min(pause, left))
            if stopped.is_set() or await asyncio.to_thread(written, base, new):
                return
            pause = min(pause * 2, longest)

    def kernel_stopped(self) -> None:
        """The kernel is gone: what it wrote is all there is (scans stop waiting for more)."""
        self._stopped.set()
        self._stopped = asyncio.Event()

    async def settle(self, timeout: float = SETTLE_S) -> None:
        """Until every scan started is done (at most ``timeout`` seconds)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)

    async def before_cell(self) -> None:
        """Let the scans that found their blobs on disk finish (at most ``BEFORE_CELL_S``),
        so the next cell hears what was not kept. A scan still waiting for the kernel's
        writer is not waited for (a cell sent right after another would wait for the disk):
        a later cell hears of it."""
        ready = [task for task, seen in self._tasks.items() if seen.is_set()]
        if ready:
            await asyncio.wait(ready, timeout=BEFORE_CELL_S)
