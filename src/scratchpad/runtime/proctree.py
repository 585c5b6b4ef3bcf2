"""What /proc says about processes: descendants (through the children files, or one shared
scan of /proc where the kernel has none), processes carrying a tag in their environment, a
memory cgroup's OOM kills. Linux only; elsewhere the answers are empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from collections.abc import Callable
from pathlib import Path

TAG = "SCRATCHPAD_PROCESS_TAG"


def descendants(pid: int) -> list[int]:
    """Every descendant of ``pid`` (zombies included), read from /proc."""
    if _HAS_CHILDREN_FILES:
        return _walk(pid, _children_from_task_files)
    table = _process_table()
    return _walk(pid, lambda parent: table.get(parent, []))


async def descendants_async(pid: int) -> list[int]:
    """:func:`descendants` off the event loop. Without per-task children files every lookup
    needs a scan of /proc, so concurrent callers (every pad stopping at shutdown) share one."""
    if _HAS_CHILDREN_FILES:
        return await asyncio.to_thread(descendants, pid)
    table = await _shared_scan()
    return _walk(pid, lambda parent: table.get(parent, []))


_scans: dict[asyncio.AbstractEventLoop, asyncio.Future[dict[int, list[int]]]] = {}


async def _shared_scan() -> dict[int, list[int]]:
    loop = asyncio.get_running_loop()
    scan = _scans.get(loop)
    if scan is None or scan.done():
        scan = _scans[loop] = asyncio.ensure_future(asyncio.to_thread(_process_table))
        scan.add_done_callback(
            lambda done: _scans.pop(loop, None) if _scans.get(loop) is done else None
        )
    return await asyncio.shield(scan)


def _walk(pid: int, children: Callable[[int], list[int]]) -> list[int]:
    found: list[int] = []
    seen = {pid}
    frontier = [pid]
    while frontier:
        for child in children(frontier.pop()):
            if child not in seen:
                seen.add(child)
                found.append(child)
                frontier.append(child)
    return found


_HAS_CHILDREN_FILES = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()


def _children_from_task_files(pid: int) -> list[int]:
    children: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.scandir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError):
                text = Path(task.path, "children").read_text()
                children.extend(int(part) for part in text.split())
    return children


def _process_table() -> dict[int, list[int]]:
    """Parent pid → child pids of every process this user can see."""
    table: dict[int, list[int]] = {}
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            stat = _stat_fields(int(entry.name))
            if stat is not None:
                table.setdefault(int(stat[1]), []).append(int(entry.name))
    return table


def _stat_fields(pid: int) -> list[bytes] | None:
    """Fields of /proc/PID/stat after the command name: state, ppid, pgrp, ..."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def tree_rss(pid: int) -> int | None:
    """Resident memory in bytes of ``pid`` and its descendants (None when it is gone)."""
    total = None
    for member in (pid, *descendants(pid)):
        try:
            with open(f"/proc/{member}/statm", "rb") as handle:
                pages = int(handle.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        total = (total or 0) + pages * _PAGE_SIZE
    return total


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def group_alive(group: int) -> bool:
    """Whether a live process (not a zombie) is in process group ``group`` (one scan)."""
    with os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit():
                stat = _stat_fields(int(entry.name))
                if stat is not None and stat[0] not in (b"Z", b"X") and int(stat[2]) == group:
                    return True
    return False


def is_stray(pid: int, group: int) -> bool:
    """A live process (not a zombie) outside ``group``."""
    stat = _stat_fields(pid)
    return stat is not None and stat[0] != b"Z" and int(stat[2]) != group


def kill(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def cgroup_oom_kills() -> int | None:
    """How many OOM kills this process's memory cgroup has seen (None where unknown)."""
    for path, key in _oom_counters():
        with contextlib.suppress(OSError, ValueError):
            for line in path.read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    return None


def _oom_counters() -> list[tuple[Path, str]]:
    """Where the memory cgroup of this process counts OOM kills (cgroup v2, then v1)."""
    places: list[tuple[Path, str]] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, group = line.split(":", 2)
            group = group.lstrip("/")
            if controllers == "":
                places.append((Path("/sys/fs/cgroup", group, "memory.events"), "oom_kill"))
            elif "memory" in controllers.split(","):
                base = Path("/sys/fs/cgroup/memory", group)
                places.append((base / "memory.oom_control", "oom_kill"))
    return places


def new_tag(scope: str) -> str:
    """A tag for one child of this process: ``scope#owner-pid#random``."""
    return f"{scope}#{os.getpid()}#{secrets.token_hex(6)}"


def _tags() -> dict[str, list[int]]:
    """Tag → pids of the processes carrying it (those whose environment we may read)."""
    found: dict[str, list[int]] = {}
    prefix = f"{TAG}=".encode()
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as handle:
                    environ = handle.read()
            except OSError:
                continue
            for item in environ.split(b"\0"):
                if item.startswith(prefix):
                    tag = item[len(prefix) :].decode("utf-8", "replace")
                    found.setdefault(tag, []).append(int(entry.name))
    return found


async def kill_tagged(tag: str) -> int:
    """SIGKILL every process carrying ``tag``; how many there were."""
    pids = (await asyncio.to_thread(_tags)).get(tag, [])
    for pid in pids:
        kill(pid, signal.SIGKILL)
    return len(pids)


async def kill_orphans(scope: str) -> int:
    """SIGKILL the processes tagged in ``scope`` whose owner is gone (a server killed
    before it could stop its kernels); how many there were."""
    killed = 0
    for tag, pids in (await asyncio.to_thread(_tags)).items():
        owner_scope, _, rest = tag.rpartition("#")[0].rpartition("#")
        if owner_scope != scope or not rest.isdigit() or running(int(rest)):
            continue
        for pid in pids:
            kill(pid, signal.SIGKILL)
        killed += len(pids)
    return killed


def running(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
