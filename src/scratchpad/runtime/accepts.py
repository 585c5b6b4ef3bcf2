"""Accepting a detached cell: the idempotency rules every edge shares, and the accept log.

A caller may name its cell (``id``), which makes a retried submit safe (the rules of an
IETF Idempotency-Key): the same id with the same payload answers the existing cell and never
runs it twice; with another payload it is refused (:class:`CellIdReusedError`, 422); while
the first submit of that id is still being accepted (its pad starting) the second is told to
ask again (:class:`CellAcceptingError`, 409).

The accept log (``<pad root>/accepted.jsonl``, 0600, framed and appended whole like the
history: history.frame) holds ``{id, payload_sha256, accepted_at, number, boot, code}`` of
every detached cell, written before the submit is answered (its code scrubbed and cut to
``CODE_CHARS``: head and tail). It keeps a payload's hash for the
rules above, and it lets a server that was killed say what became of a cell it had
accepted: an id of an earlier server process (``boot``) that the history does not hold is
recorded ``killed`` (with its code) the first time the pad's history is read; it is never
run again. Cells
run in the order of their numbers, so only an id numbered after the last recorded cell can
be such a cell (older ids missing from the history were folded away). A reset forgets the
log with the history.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import secrets
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scratchpad.errors import CellAcceptingError, CellIdReusedError, PadError, ScratchpadError
from scratchpad.fsutil import append_whole, atomic_write_bytes, disk_full_in
from scratchpad.runtime import checkpoint
from scratchpad.runtime.cell import Cell, new_cell_id
from scratchpad.runtime.history import CellHistory, frame, unframe
from scratchpad.runtime.watch import PadWatch
from scratchpad.scrub import scrub
from scratchpad.text import cut_middle

if TYPE_CHECKING:
    from scratchpad.runtime.base import CellRequest, ScratchpadRuntime
    from scratchpad.runtime.manager import ScratchpadManager

ACCEPTED = "accepted.jsonl"
MAX_BYTES = 1024 * 1024  # 100 entries of the longest code, thousands of short ones
CODE_CHARS = 8 * 1024  # of a cell's code in its entry (head and tail)
QUEUED_WITHIN_S = 900.0  # a cell not queued by then (its pad never came up) is not entered
BOOT = secrets.token_hex(6)  # this server process: ids it accepted are its own to finish
KILLED = "The server stopped (or was killed) before this cell ended; it was not run again. "
LOST = "Its variables, if it ran, were lost with its kernel.\n"
RESTORED = (
    "What it changed, if it ran, was lost with its kernel; the pad's next kernel restores the "
    "variables saved after the last finished cell from the checkpoint.\n"
)
log = logging.getLogger(__name__)
_locks: dict[Path, threading.Lock] = {}
_locks_lock = threading.Lock()
_running: set[asyncio.Task[None]] = set()  # detached cells: nobody awaits them


@dataclass(frozen=True, slots=True)
class Accepted:
    """One line of the accept log."""

    id: str
    payload_sha256: str
    accepted_at: float
    number: int = 0
    boot: str = ""
    code: str = ""  # scrubbed, cut to CODE_CHARS (a killed cell shows it)


def entry_of(cell_id: str, sha: str, number: int, code: str) -> Accepted:
    """This server's entry for a cell accepted now."""
    kept = cut_middle(scrub(code), CODE_CHARS)
    return Accepted(cell_id, sha, time.time(), number, BOOT, kept)


def payload_sha256(request: CellRequest, timeout_s: float | None) -> str:
    """The hash of what a submit asks: two submits of one id are the same when it is."""
    payload = {
        "code": request.code,
        "description": request.description,
        "estimated_time": request.estimated_time,
        "estimated_seconds": request.estimated_seconds,
        "timeout_s": timeout_s,
    }
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "replace")).hexdigest()


def check_repeat(
    cell_id: str, code: str, *, known_code: str, sha: str | None = None, known_sha: str | None
) -> None:
    """The one rule for a submit whose id names a known cell: the same payload is that
    cell (the caller answers it, never runs it again); another one is refused. Compared by
    payload hash where both are known, else by code (cells submitted without a hash)."""
    same = sha == known_sha if sha is not None and known_sha is not None else code == known_code
    if not same:
        raise CellIdReusedError(
            f"cell id {cell_id!r} already names a cell with other code (or another "
            "description, estimate or timeout); give this cell a new id"
        )


class AcceptLog:
    """The accept log of the pad whose directory is ``root``."""

    def __init__(self, root: Path, disk: Path | None = None) -> None:
        self.path = root / ACCEPTED
        self.disk = disk or root

    def load(self) -> dict[str, Accepted]:
        """The whole entries by id (torn ones skipped: a crash mid-append)."""
        entries: dict[str, Accepted] = {}
        try:
            handle = self.path.open("rb")
        except OSError:
            return entries
        with handle:
            for line in handle:
                body, _ = unframe(line)
                if body is None:
                    continue
                with contextlib.suppress(ValueError, TypeError):
                    entry = Accepted(**json.loads(body))
                    entries[entry.id] = entry
        return entries

    def append(self, entry: Accepted) -> None:
        """Add one entry, whole or not at all (a full disk raises DiskFullError); past
        ``MAX_BYTES`` the older half goes (their cells are long recorded: a repeat of such an
        old id is then compared by its code)."""
        data = frame(json.dumps(asdict(entry), ensure_ascii=False).encode())
        with _lock(self.path), disk_full_in(self.disk):
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                append_whole(fd, data)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if size > MAX_BYTES:
                newest = sorted(self.load().values(), key=lambda e: e.accepted_at)
                kept = newest[len(newest) // 2 :]
                body = b"".join(frame(json.dumps(asdict(e)).encode()) for e in kept)
                atomic_write_bytes(self.path, body, mode=0o600)

    def clear(self) -> None:
        """Forget every entry (the pad was reset: its cells and their numbers start over)."""
        with _lock(self.path), contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _lock(path: Path) -> threading.Lock:
    with _locks_lock:
        return _locks.setdefault(path, threading.Lock())


def load_recovered(history: CellHistory) -> list[Cell]:
    """The cells of ``history`` (see CellHistory.load), with each cell an earlier server
    process accepted and never recorded now recorded ``killed`` (blocks: call it off the
    event loop)."""
    accepts = AcceptLog(history.path.parent, history.disk)
    with _lock(accepts.path):
        cells = history.load()
        if not accepts.path.exists():
            return cells
        known = {cell.id for cell in cells}
        last = max((cell.number for cell in cells), default=0)  # older ones were folded away
        lost = [
            entry
            for entry in accepts.load().values()
            if entry.boot != BOOT and entry.id not in known and entry.number > last
        ]
        saved = checkpoint.exists(history.path.parent)
        for entry in lost:
            error = KILLED + (RESTORED if saved else LOST)
            cell = Cell(
                code=entry.code, id=entry.id, number=entry.number, status="killed", error=error
            )
            try:
                history.append(cell)
            except OSError as exc:
                log.warning("%s: could not record lost cell %s: %s", history.path, entry.id, exc)
            cells.append(cell)
        if lost:
            history.close()  # a pad only looked at (not running) keeps no descriptor
        return cells


# -- the submit shared by the edges -----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Submitted:
    """A detached cell accepted (``repeat``: an earlier submit of its id, not run again)."""

    pad: ScratchpadRuntime
    watch: PadWatch
    id: str
    repeat: bool


async def submit(
    manager: ScratchpadManager, name: str, request: CellRequest, timeout_s: float | None
) -> Submitted:
    """Accept a cell of pad ``name`` that runs whoever follows it (its journal, in the pad's
    watch, keeps what it says): queued, in the accept log, then answered."""
    cell_id = request.cell_id or new_cell_id()
    sha = payload_sha256(request, timeout_s)
    key = (name, cell_id)
    if key in manager.accepting:
        raise CellAcceptingError(
            f"cell {cell_id!r} of pad {name!r} is still being accepted (its pad is starting); "
            "ask again in a moment: the same id then answers that cell"
        )
    manager.accepting[key] = sha
    try:
        pad = await manager.get_or_create(name)
        watch = getattr(pad, "watch", None)
        root = getattr(pad, "root", None)
        if not isinstance(watch, PadWatch) or not isinstance(root, Path):
            raise PadError(f"pad {name!r}: detached cells need a pad of this server's own")
        accepts = AcceptLog(root, manager.settings.home)
        earlier = (await asyncio.to_thread(accepts.load)).get(cell_id)
        known = await known_cell(pad, watch, cell_id)
        if known is not None:
            check_repeat(
                cell_id, request.code, known_code=known.code, sha=sha,
                known_sha=None if earlier is None else earlier.payload_sha256,
            )  # fmt: skip
            return Submitted(pad, watch, cell_id, repeat=True)
        await _start(pad, watch, request, cell_id, timeout_s)
        number = getattr(await known_cell(pad, watch, cell_id), "number", 0)
        entry = entry_of(cell_id, sha, number, request.code)
        await asyncio.to_thread(accepts.append, entry)
        return Submitted(pad, watch, cell_id, repeat=False)
    finally:
        manager.accepting.pop(key, None)


async def known_cell(pad: ScratchpadRuntime, watch: PadWatch, cell_id: str) -> Cell | None:
    """The cell of this id, queued, running or recorded; None if the pad has none."""
    queued = watch.queue.get(cell_id)
    if queued is not None:
        return queued
    running = watch.running
    if running is not None and running.cell.id == cell_id:
        return running.cell
    for cell in reversed(await pad.load_cells()):
        if cell.id == cell_id:
            return cell
    return None


async def _start(
    pad: ScratchpadRuntime,
    watch: PadWatch,
    request: CellRequest,
    cell_id: str,
    timeout_s: float | None,
) -> None:
    """Run the cell in a task of its own and wait until it is queued (or failed first)."""

    async def run() -> None:
        try:
            async for _ in pad.execute_streaming(
                request.code,
                description=request.description,
                estimated_time=request.estimated_time,
                estimated_seconds=request.estimated_seconds,
                timeout_s=timeout_s,
                cell_id=cell_id,
            ):
                pass  # its watch journals what it says
        except ScratchpadError as exc:
            if watch.journals.get(cell_id) is not None:  # after it was accepted: logged
                log.warning("pad %r: detached cell %s: %s", pad.name, cell_id, exc)
            else:
                raise

    task = _keep(asyncio.get_running_loop().create_task(run()))
    if await watch.journals.wait_open(cell_id, task) is None and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]  # it failed before it was queued


def _keep(task: asyncio.Task[None]) -> asyncio.Task[None]:
    _running.add(task)
    task.add_done_callback(_running.discard)
    return task


def remember(pad: ScratchpadRuntime, request: CellRequest, timeout_s: float | None) -> None:
    """Enter a cell that runs on after its stream (``execute-stream`` asked to continue)
    into the accept log once it is queued, so a server killed meanwhile answers its id
    ``killed`` after a restart, as it does for a submitted cell."""
    watch, root = getattr(pad, "watch", None), getattr(pad, "root", None)
    cell_id = request.cell_id
    if not isinstance(watch, PadWatch) or not isinstance(root, Path) or cell_id is None:
        return
    sha = payload_sha256(request, timeout_s)

    async def enter() -> None:
        giving_up = asyncio.ensure_future(asyncio.sleep(QUEUED_WITHIN_S))
        try:
            if await watch.journals.wait_open(cell_id, giving_up) is None:
                return
        finally:
            giving_up.cancel()
        number = getattr(await known_cell(pad, watch, cell_id), "number", 0)
        try:
            await asyncio.to_thread(
                AcceptLog(root).append, entry_of(cell_id, sha, number, request.code)
            )
        except OSError as exc:
            log.warning("pad %r: cell %s not in the accept log: %s", pad.name, cell_id, exc)

    _keep(asyncio.get_running_loop().create_task(enter()))
