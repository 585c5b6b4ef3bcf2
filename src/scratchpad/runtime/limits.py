"""What one pad may take of the machine, and the watch that holds it to that.

On by default, for the whole process tree of a pad (its kernel, what its cells start):

- **memory**: half of this machine's memory unless set (``SCRATCHPAD_PAD_MEMORY_MB``); a
  watchdog thread sums the resident memory of each pad's processes (and the memory-only
  files they hold: :func:`memory_files`) every ~100 ms while a cell runs (every second
  between cells) and stops a pad past its limit (its cell is told: "out of memory: the pad
  used N MiB of its M MiB limit"). No cgroup is needed: it works for every user;
- **processes**: 512 (``SCRATCHPAD_PAD_PROCESSES``), as ``RLIMIT_NPROC`` in the pad's own
  user namespace (where namespaces work: counted for the pad alone), else by the watchdog;
- **CPU**: a weight (``SCRATCHPAD_PAD_CPU_WEIGHT``, 100 = the server's), applied as a nice
  value, so a busy pad cannot starve the server;
- **disk**: what a pad's files may take (``SCRATCHPAD_PAD_DISK_MB``): its directory, and what
  its workspace grew by since its kernel started; checked before and after each cell (and
  every few seconds while one runs); a pad past it is stopped and says why. Every single
  file is bounded by the same size (``RLIMIT_FSIZE``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError, PadLimitError
from scratchpad.runtime.proctree import descendants

log = logging.getLogger(__name__)
MIB = 1 << 20
TICK_S = 0.1  # how often the watchdog looks at a pad whose cell runs
IDLE_EVERY_S = 1.0  # and at one between cells (threads a cell left may still grow)
DISK_EVERY_S = 5.0  # how often it measures the files of a pad whose cell runs
MAX_ENTRIES = 200_000  # files one disk measurement looks at before it gives up
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
MEMFD = "/memfd:"  # how /proc names a memory-only file (memfd_create)


def meminfo(field: bytes, unknown: int) -> int:
    """Bytes of one field of /proc/meminfo (``b"MemTotal"``), or ``unknown`` where it does not
    say."""
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo", "rb") as info:
        for line in info:
            if line.startswith(field + b":"):
                return int(line.split()[1]) * 1024
    return unknown


def machine_memory() -> int:
    """Bytes of memory of this machine (MemTotal), or 8 GiB where /proc does not say."""
    return meminfo(b"MemTotal", 8 << 30)


# What each limit of a pad may be (0 turns one off, but for the CPU weight): below the least,
# a kernel cannot start or work; the most keeps the numbers within what the system takes.
LIMIT_RANGES: dict[str, tuple[int, int]] = {
    "memory_mb": (64, 1 << 40),
    "processes": (32, 1 << 22),
    "cpu_weight": (1, 10000),
    "disk_mb": (16, 1 << 40),
}
LIMIT_RANGES_TEXT = ", ".join(
    f"{name} ({low}..{high:,}" + ("" if name == "cpu_weight" else ", or 0 for none") + ")"
    for name, (low, high) in LIMIT_RANGES.items()
)


def _checked(name: str, value: object) -> int:
    low, high = LIMIT_RANGES[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"limit {name} must be a whole number, not {value!r}")
    if (value == 0 and name != "cpu_weight") or low <= value <= high:
        return value
    raise InvalidInputError(
        f"limit {name}={value} is out of range: give {low}..{high:,}"
        + ("" if name == "cpu_weight" else ", or 0 for none")
        + (" (a kernel needs that many to start)" if value < low else "")
    )


@dataclass(frozen=True)
class PadLimits:
    """One pad's limits (None: no limit of that kind)."""

    memory_bytes: int | None
    processes: int | None
    cpu_weight: int
    disk_bytes: int | None

    @classmethod
    def from_settings(cls, settings: Settings) -> PadLimits:
        memory = settings.pad_memory_mb
        return cls(
            memory_bytes=machine_memory() // 2 if memory is None else (memory * MIB or None),
            processes=settings.pad_processes or None,
            cpu_weight=settings.pad_cpu_weight,
            disk_bytes=settings.pad_disk_mb * MIB or None,
        )

    def changed(self, values: Mapping[str, object]) -> PadLimits:
        """These limits with some set anew (``memory_mb``, ``processes``, ``cpu_weight``,
        ``disk_mb``: whole numbers; 0: none of that kind; None: unchanged).
        InvalidInputError names what is wrong and what may be given."""
        if not isinstance(values, Mapping):
            raise InvalidInputError(f"limits must be an object of {LIMIT_RANGES_TEXT}")
        unknown = sorted(set(values) - set(LIMIT_RANGES))
        if unknown:
            raise InvalidInputError(
                f"unknown limit(s) {', '.join(map(repr, unknown))}: give {LIMIT_RANGES_TEXT}"
            )
        given = {name: _checked(name, value) for name, value in values.items() if value is not None}
        update: dict[str, Any] = {}
        if "memory_mb" in given:
            update["memory_bytes"] = given["memory_mb"] * MIB or None
        if "disk_mb" in given:
            update["disk_bytes"] = given["disk_mb"] * MIB or None
        if "processes" in given:
            update["processes"] = given["processes"] or None
        if "cpu_weight" in given:
            update["cpu_weight"] = given["cpu_weight"]
        return replace(self, **update)

    @property
    def nice(self) -> int:
        """The nice value that gives roughly this CPU weight beside the server's 100 (each
        nice step is ~1.25x); never above the server's priority."""
        steps = math.log(100 / max(1, self.cpu_weight)) / math.log(1.25)
        return max(0, min(19, round(steps)))

    def for_launcher(self) -> dict[str, int]:
        """The resource limits a pad's process applies to itself (see ``inkernel/confine``)."""
        applied = {"nice": self.nice}
        if self.processes is not None:
            applied["processes"] = self.processes
        if self.disk_bytes is not None:
            applied["file_bytes"] = self.disk_bytes
        return applied

    def to_dict(self) -> dict[str, int | None]:
        return {
            "memory_mb": None if self.memory_bytes is None else self.memory_bytes // MIB,
            "processes": self.processes,
            "cpu_weight": self.cpu_weight,
            "disk_mb": None if self.disk_bytes is None else self.disk_bytes // MIB,
        }


def describe(limits: PadLimits, *, namespaces: bool) -> dict[str, str]:
    """What ``/v1/server`` and the README say of each limit: its value and what holds it."""

    def size(value: int | None) -> str:
        return "none" if value is None else f"{value // MIB:,} MiB"

    return {
        "memory": f"{size(limits.memory_bytes)} per pad: the resident memory of all its "
        "processes and the memory-only files (memfd) they hold, checked "
        f"every {TICK_S:g} s while a cell runs (every {IDLE_EVERY_S:g} s "
        "between cells) by a watchdog that stops the pad",
        "processes": "none"
        if limits.processes is None
        else f"{limits.processes} per pad: "
        + (
            "RLIMIT_NPROC in its own user namespace"
            if namespaces
            else "counted by the watchdog, which stops the pad"
        ),
        "cpu": f"weight {limits.cpu_weight} beside the server's 100 (nice {limits.nice})",
        "disk": f"{size(limits.disk_bytes)} per pad: its own directories (its working directory "
        "whole, when it is the pad's own) and what a bound workspace grew by since the pad "
        f"first measured it; measured after cells and every {DISK_EVERY_S:g} s while one runs "
        "(a cell past it is stopped, a pad past it refuses cells until files go); no single "
        "file larger",
    }


def mib(value: int) -> str:
    """Bytes as MiB with one decimal (a value just over a limit reads over it)."""
    return f"{value / MIB:,.1f} MiB"


def over_memory(used: int, limit: int) -> str:
    return f"out of memory: the pad used {mib(used)} of its {limit // MIB:,} MiB limit"


def over_processes(count: int, limit: int) -> str:
    return f"too many processes: the pad ran {count} of its {limit} allowed"


def over_disk(used: int, limit: int) -> str:
    return f"out of disk: the pad's files take {mib(used)} of its {limit // MIB:,} MiB limit"


DISK_REMEDY = (
    "delete some (the web UI's Files, `scratchpad files rm`, or DELETE "
    "/v1/pads/{name}/files/{path}), or give the pad a larger limit (limits.disk_mb of "
    "/scratchpad/start or get_or_create; SCRATCHPAD_PAD_DISK_MB for every pad)"
)


# -- disk ------------------------------------------------------------------------------------
def disk_usage(paths: Iterable[Path]) -> int | None:
    """Bytes the files below ``paths`` take on disk (symbolic links not followed, each
    file once); None when there are more than MAX_ENTRIES to look at."""
    seen: set[tuple[int, int]] = set()
    total = entries = 0
    stack = [str(path) for path in paths]
    while stack:
        directory = stack.pop()
        try:
            scan = os.scandir(directory)
        except OSError:
            continue
        with scan:
            for entry in scan:
                entries += 1
                if entries > MAX_ENTRIES:
                    return None
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if (info.st_dev, info.st_ino) in seen:
                    continue
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return total


@dataclass
class DiskMeter:
    """A pad's disk use: its own directories (its venv and temp directory; its working
    directory when it is the pad's own, under the home), plus what a bound workspace (the
    person's, shared by every pad) grew by since the pad first measured it."""

    own: tuple[Path, ...]
    workspace: Path | None  # a bound workspace; None when the pad's is among ``own``
    baseline: int | None = None

    def start(self) -> None:
        """Measure where a bound workspace starts from (once per pad: restarts keep it)."""
        if self.baseline is None:
            self.baseline = self._workspace_usage() or 0

    def used(self) -> int | None:
        own = disk_usage(self.own)
        workspace = self._workspace_usage()
        if own is None:
            return None
        grown = 0 if workspace is None else max(0, workspace - (self.baseline or 0))
        return own + grown

    def _workspace_usage(self) -> int | None:
        return 0 if self.workspace is None else disk_usage([self.workspace])


def disk_meter(settings: Settings, root: Path, workspace: Path) -> DiskMeter:
    """The meter of a pad with its venv at ``root`` working in ``workspace``: a workspace
    under the home is the pad's own (counted whole), any other is the person's (its growth)."""
    if settings.home in workspace.parents:
        return DiskMeter(own=(root, workspace), workspace=None)
    return DiskMeter(own=(root,), workspace=workspace)


# -- the watchdog ----------------------------------------------------------------------------
@dataclass
class Watched:
    """One kernel under watch: its process tree (from ``pid``), its limits, what to do when
    it goes past one (``stop(reason)``, called on the watchdog's thread), and whether a
    cell runs (``busy()``: its disk is measured while it runs)."""

    pid: int
    limits: PadLimits
    stop: Callable[[str], None]
    busy: Callable[[], bool]
    disk: DiskMeter | None = None
    next_check: float = 0.0
    next_disk: float = 0.0
    stopped: bool = False


class Watchdog:
    """One thread per process that holds every running pad to its limits."""

    def __init__(self) -> None:
        self._watched: dict[int, Watched] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, watched: Watched) -> None:
        with self._lock:
            self._watched[watched.pid] = watched
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="scratchpad-limits", daemon=True
                )
                self._thread.start()

    def forget(self, pid: int) -> None:
        with self._lock:
            self._watched.pop(pid, None)

    def _run(self) -> None:
        while True:
            with self._lock:
                watched = list(self._watched.values())
                if not watched:
                    self._thread = None
                    return
            now = time.monotonic()
            for item in watched:
                if not item.stopped:
                    try:
                        self.check(item, now)
                    except Exception:  # one pad's trouble never stops the watch of the others
                        log.exception("checking the limits of pad process %d failed", item.pid)
            time.sleep(TICK_S)

    def check(self, item: Watched, now: float) -> None:
        busy = item.busy()
        if not busy and now < item.next_check:
            return
        item.next_check = now + IDLE_EVERY_S
        tree = [item.pid, *descendants(item.pid)]
        limits = item.limits
        if limits.processes is not None and len(tree) > limits.processes + 3:  # + its launcher
            self._stop(item, over_processes(len(tree), limits.processes), tree)
            return
        memory = limits.memory_bytes
        if memory is not None:
            rss = resident(tree)
            # Memory-only files are in no process's resident memory; looking for them costs
            # a look at every descriptor, so only when the machine holds enough of them.
            held = memory_files(tree) if rss + machine_shmem() > memory else 0
            if rss + held > memory:
                used = proportional(tree) + held  # shared pages (forked workers) counted once
                if used > memory:
                    self._stop(item, over_memory(used, memory), tree)
                    return
        if item.disk is not None and limits.disk_bytes is not None and now >= item.next_disk:
            item.next_disk = now + DISK_EVERY_S
            if busy:
                used_disk = item.disk.used()
                if used_disk is not None and used_disk > limits.disk_bytes:
                    self._stop(item, over_disk(used_disk, limits.disk_bytes), tree)

    def _stop(self, item: Watched, reason: str, tree: list[int]) -> None:
        item.stopped = True
        log.warning("pad process %d stopped: %s", item.pid, reason)
        item.stop(reason)
        for pid in tree:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def resident(pids: Iterable[int]) -> int:
    """Resident memory of these processes, summed (shared pages counted in each)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as handle:
                total += int(handle.read().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            continue
    return total


def machine_shmem() -> int:
    """Bytes of shared memory of the whole machine (``Shmem``: tmpfs files, memory-only files,
    shared mappings): no pad's memory-only files can hold more."""
    return meminfo(b"Shmem", 1 << 62)  # unknown: look at every pad's descriptors


def memory_files(pids: Iterable[int]) -> int:
    """Bytes held in memory-only files (``memfd_create``) that these processes have open or
    mapped, each file counted once. What a cell writes into one through its descriptor is in
    no process's resident memory, so without this a pad could hold any amount beyond its
    limit. A mapped one whose descriptor was closed is found through ``map_files`` (root
    only: a user's server sees the open ones); its mapped pages count twice, so the limit
    errs on the safe side."""
    sizes: dict[tuple[int, int], int] = {}
    for pid in pids:
        for link in _memfd_links(pid):
            try:
                info = os.stat(link)
            except OSError:
                continue
            sizes[(info.st_dev, info.st_ino)] = info.st_blocks * 512
    return sum(sizes.values())


def _memfd_links(pid: int) -> list[str]:
    """The /proc links to the memory-only files ``pid`` has open or mapped."""
    links = []
    with contextlib.suppress(OSError):
        for name in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{name}").startswith(MEMFD):
                    links.append(f"/proc/{pid}/fd/{name}")
    with contextlib.suppress(OSError), open(f"/proc/{pid}/maps", "rb") as maps:
        for line in maps:
            if MEMFD.encode() in line:
                links.append(f"/proc/{pid}/map_files/{line.split(maxsplit=1)[0].decode()}")
    return links


def proportional(pids: Iterable[int]) -> int:
    """Proportional set size of these processes, summed: each shared page divided among the
    processes that map it (slower to read than resident memory; asked only past a limit)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
                for line in handle:
                    if line.startswith(b"Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, IndexError, ValueError):
            continue
    return total


WATCHDOG = Watchdog()
DISK_MEASURE_S = 1.0  # a pad's files are measured at most this often after its cells


class Stoppable(Protocol):
    """A kernel the watchdog can hold: its process tree's root, and what to tell it before
    it is killed past a limit."""

    pid: int

    def stop_for(self, reason: str) -> None: ...


class LimitGuard:
    """One pad held to its limits: each kernel of it under the watchdog; its files measured
    after cells (in the background, at most once a second: tiny cells pay nothing), and, once
    they are over the disk limit, every cell refused until files go (measured again first)."""

    def __init__(self, name: str, limits: PadLimits, meter: DiskMeter, busy: Callable[[], bool]):
        self.name = name
        self._limits = limits
        self._meter = meter
        self._busy = busy
        self._watched: Watched | None = None
        self._over: str | None = None  # why the pad runs no more cells
        self._next_measure = 0.0
        self._measuring: asyncio.Task[None] | None = None

    @property
    def limits(self) -> PadLimits:
        return self._limits

    @limits.setter
    def limits(self, limits: PadLimits) -> None:
        """New limits: the watchdog holds a running kernel to them at once."""
        self._limits = limits
        if self._watched is not None:
            self._watched.limits = limits

    async def watch(self, kernel: Stoppable) -> None:
        """Hold a new kernel's process tree to the limits."""
        if self._limits.disk_bytes is not None:
            await asyncio.to_thread(self._meter.start)

        def stop(reason: str) -> None:
            if reason.startswith("out of disk"):
                self.stopped_for_disk(reason)
            kernel.stop_for(reason)

        self._watched = Watched(kernel.pid, self._limits, stop, busy=self._busy, disk=self._meter)
        WATCHDOG.watch(self._watched)

    def forget(self) -> None:
        """The kernel is being stopped: no more watching."""
        if self._watched is not None:
            WATCHDOG.forget(self._watched.pid)
            self._watched = None

    async def before_cell(self) -> None:
        """PadLimitError while the pad's files are over its disk limit (measured again now:
        files may have been deleted since)."""
        if self._over is None:
            return
        limit = self._limits.disk_bytes
        used = None if limit is None else await asyncio.to_thread(self._meter.used)
        self._over = (
            None if used is None or limit is None or used <= limit else over_disk(used, limit)
        )
        if self._over is not None:
            raise PadLimitError(
                f"pad {self.name!r} runs no more cells: {self._over}; {DISK_REMEDY}"
            )

    def stopped_for_disk(self, reason: str) -> None:
        """The watchdog stopped the kernel for its files: cells are refused until they go."""
        self._over = reason

    def after_cell(self) -> None:
        """Measure the pad's files in the background, when due."""
        loop = asyncio.get_running_loop()
        limit = self._limits.disk_bytes
        if limit is None or self._measuring is not None or loop.time() < self._next_measure:
            return
        self._next_measure = loop.time() + DISK_MEASURE_S

        async def measure() -> None:
            try:
                used = await asyncio.to_thread(self._meter.used)
                self._over = None if used is None or used <= limit else over_disk(used, limit)
            finally:
                self._measuring = None

        self._measuring = loop.create_task(measure())
