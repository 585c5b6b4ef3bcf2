"""One line of the pad list: how a pad is (idle, busy, asleep, stopped, dead and why), what it
runs, since when, how much memory its kernel's processes hold, when it was last used.

Running pads are described from their runtime and their watch (no I/O); their memory and
the history and state files of the others are read on a worker thread.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from scratchpad.runtime.base import ScratchpadRuntime
from scratchpad.runtime.history import count_cells
from scratchpad.runtime.kernel import KernelProcess
from scratchpad.runtime.padstate import read_state
from scratchpad.runtime.proctree import tree_rss
from scratchpad.runtime.watch import PadWatch
from scratchpad.scrub import scrub

HISTORY = "history.jsonl"


@dataclass(frozen=True, slots=True)
class PadInfo:
    """``status``: ``idle`` | ``busy`` (a cell runs) | ``asleep`` (no kernel: it went to
    sleep, or the server restarted, since it last ran cells; its next use starts one) |
    ``stopped`` (no kernel: closed, or no cells yet) | ``dead`` (its kernel died and was not
    restarted yet; ``cause`` says how); ``queued`` counts the cells waiting behind the
    running one; times are epoch seconds. Clients take a status they do not know as
    ``stopped``: more may come."""

    name: str
    status: str
    cells: int
    queued: int = 0
    busy_since: float | None = None
    running: dict[str, str] | None = None
    memory_bytes: int | None = None
    last_activity: float | None = None
    cause: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def kernel_death(kernel: KernelProcess | None) -> str | None:
    """How the kernel ended, in its own words ("exited with code 3", "was killed by
    SIGKILL: out of memory ..."), or None while it runs."""
    if kernel is None:
        return None
    if kernel.protocol_error:
        return kernel.protocol_error
    code = kernel.group.returncode
    if code is not None:
        return kernel.describe_exit(code)
    return "closed its control channel" if kernel.channel_closed else None


def _kernel(pad: ScratchpadRuntime) -> KernelProcess | None:
    kernel = getattr(pad, "kernel", None)  # a local pad's; other backends have none here
    return kernel if isinstance(kernel, KernelProcess) else None


def describe(pad: ScratchpadRuntime, watch: PadWatch | None, status: str | None = None) -> PadInfo:
    """A running pad as it is now, without I/O (memory and last use from disk: :func:`measure`)."""
    kernel = _kernel(pad)
    cause = kernel_death(kernel)
    if status is None:
        status = "stopped" if pad.closed else "dead" if cause else "busy" if pad.busy else "idle"
    running = watch.running if watch is not None and status in ("busy", "dead") else None
    return PadInfo(
        name=pad.name,
        status=status,
        cells=len(pad.cells),
        queued=pad.queued,
        busy_since=None if running is None else running.started_at,
        running=None if running is None else _brief(running.cell.id, running.cell.description),
        last_activity=None if watch is None else watch.last_activity,
        cause=scrub(cause) if cause and status == "dead" else None,
    )


def _brief(cell_id: str, description: str) -> dict[str, str]:
    return {"id": cell_id, "description": scrub(description)}


def measure(info: PadInfo, pid: int | None, root: Path | None) -> PadInfo:
    """``info`` with the memory of the kernel's process tree and, when no cell ran since
    this process started, the last use from the history file's time (blocking I/O)."""
    memory = tree_rss(pid) if pid is not None and info.status in ("idle", "busy") else None
    last = info.last_activity
    if last is None and root is not None:
        last = modified(root / HISTORY)
    return replace(info, memory_bytes=memory, last_activity=last)


def describe_now(
    pad: ScratchpadRuntime, watch: PadWatch | None, status: str | None = None
) -> dict[str, Any]:
    """:func:`describe` then :func:`measure`, at once (a status event: a few /proc reads)."""
    info = describe(pad, watch, status)
    return measure(info, pad_pid(pad), pad_root(pad)).to_dict()


def pad_pid(pad: ScratchpadRuntime) -> int | None:
    kernel = _kernel(pad)
    return None if kernel is None else kernel.pid


def pad_root(pad: ScratchpadRuntime) -> Path | None:
    root = getattr(pad, "root", None)
    return root if isinstance(root, Path) else None


def last_active(moment: float | None, now: float) -> str:
    """When a pad was last active, as a person reads it: 'active 12 s ago', 'never active'."""
    if moment is None:
        return "never active"
    return f"active {span(now - moment)} ago"


def span(seconds: float) -> str:
    """A time span as a person reads it, in its largest whole unit: '12 s', '3 min', '2 h'."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f} {unit}"
    return f"{seconds:.0f} s"


def modified(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


async def describe_running(pads: list[tuple[ScratchpadRuntime, PadWatch | None]]) -> list[PadInfo]:
    """Running pads, their memory and history times read on one worker thread."""
    infos = []
    for pad, watch in pads:
        await pad.load_cells()
        infos.append((describe(pad, watch), pad_pid(pad), pad_root(pad)))
    return await asyncio.to_thread(lambda: [measure(*entry) for entry in infos])


class HistoryCounts:
    """Cells and last use of pads without a kernel from their history and state files, the
    history counted again only when it changed (call from a worker thread)."""

    def __init__(self) -> None:
        self._known: dict[Path, tuple[int, int, int]] = {}  # path → (size, mtime_ns, cells)

    def stopped(self, name: str, root: Path, *, closed: bool = False) -> PadInfo:
        """Pad ``name`` at ``root``, which runs no kernel here: ``stopped`` when ``closed``
        on purpose or without cells, else ``asleep`` (it fell asleep, or the server restarted
        since it ran cells: its next use brings it back)."""
        state = read_state(root)
        path = root / HISTORY
        try:
            stat = path.stat()
        except OSError:
            cells, last = 0, modified(root)
        else:
            cells, last = self.count(path, stat), stat.st_mtime
        if state.last_activity is not None:
            last = max(state.last_activity, last or 0.0)
        asleep = not closed and (state.asleep_since is not None or cells > 0)
        status = "asleep" if asleep else "stopped"
        return PadInfo(name, status, cells, last_activity=last)

    def count(self, path: Path, stat: os.stat_result) -> int:
        known = self._known.get(path)
        if known is not None and known[:2] == (stat.st_size, stat.st_mtime_ns):
            return known[2]
        cells = count_cells(path)
        self._known[path] = (stat.st_size, stat.st_mtime_ns, cells)
        return cells
