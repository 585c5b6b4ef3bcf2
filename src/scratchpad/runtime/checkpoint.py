"""Checkpoints of a pad's variables, server side: where they live, what the kernel is told,
asking a fresh kernel to restore them, the note that tells the next cell, deleting them.

The kernel writes and reads the checkpoint (``inkernel/checkpoint.py``); the server never
unpickles it: the blobs are the pad's bytes, loaded only inside the pad's sandbox. Here they
are opaque files to rename or delete; a manifest is read only as capped, untrusted JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import importlib.util
import json
import logging
import os
import stat
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError
from scratchpad.fsutil import (
    NO_SPACE,
    PRIVATE_FILE_MODE,
    copy_private,
    private_dir,
)
from scratchpad.runtime import sandboxing, workdir
from scratchpad.runtime.kernel import KernelProcess
from scratchpad.scrub import Scrubber, scrubber
from scratchpad.scrub.matcher import is_secret_length
from scratchpad.scrub.patterns import KEY_SHAPES

DIR_NAME = sandboxing.CHECKPOINT_DIR
ASIDE_PREFIX = "checkpoint.failed-"
LIBRARIES = ("cloudpickle", "dill")
MANIFEST_CAP = 4 << 20  # bytes of a manifest the server reads
SCAN_PIECE = 1 << 20  # bytes of a blob searched for secrets at a time
NOTE_NAMES = 60  # names listed in a note
NOTE_REASONS = 20
log = logging.getLogger(__name__)


def directory(root: Path) -> Path:
    return root / DIR_NAME


def exists(root: Path) -> bool:
    """Whether the pad has a checkpoint to restore (its ``HEAD``; never through a link)."""
    return _real_dir(directory(root)) and _is(directory(root) / "HEAD", stat.S_ISREG)


def damage(root: Path) -> str | None:
    """Why a checkpoint that was written cannot be restored (None: none was, or it can be):
    its ``HEAD`` gone or not a file, or a link where its files go (left by a cell)."""
    base = directory(root)
    if not _real_dir(base) or exists(root):
        return None
    if os.path.lexists(base / "HEAD"):
        return "its HEAD is not a file"
    for name in ("blobs", "manifests"):
        if os.path.islink(base / name):
            return f"a link stands where its {name} go"
    try:
        written = any(os.scandir(base / "manifests"))
    except OSError:
        written = False
    return "its HEAD is gone" if written else None


def _is(path: Path, kind: Callable[[int], bool]) -> bool:
    try:
        return kind(os.lstat(path).st_mode)
    except OSError:
        return False


def _real_dir(path: Path) -> bool:
    return _is(path, stat.S_ISDIR)


def _remove(path: Path) -> None:
    """Delete ``path`` whatever it is: a link (or a file) in the place of a directory is
    unlinked, never followed; a tree goes as workdir removes one (modes a cell set too)."""
    try:
        if _real_dir(path):
            workdir.remove_tree(path)
        else:
            path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("could not delete %s: %s", path, exc)


def prepare(root: Path) -> Path:
    """The checkpoint directory, made (0700) before the kernel starts: under Landlock alone,
    one made later would be out of its reach until the next start."""
    return private_dir(directory(root))


@cache
def libraries() -> dict[str, str]:
    """The host's site directories of the serializers, found without importing them: the
    kernel finds those names, and only those, there (worker.py ``_LibraryFinder``)."""
    found = {}
    for name in LIBRARIES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            found[name] = os.path.dirname(os.path.dirname(os.path.realpath(spec.origin)))
    return found


def kernel_config(settings: Settings, root: Path, workspace: Path) -> dict[str, Any] | None:
    """What the kernel is told of checkpoints (None: off for this pad)."""
    if not settings.checkpoint_pad_mb:
        return None
    return {
        "dir": str(directory(root)),
        "var_cap": settings.checkpoint_var_mb << 20,
        "pad_cap": settings.checkpoint_pad_mb << 20,
        "keep": settings.checkpoint_keep,
        "sweep_cells": settings.checkpoint_sweep_cells,
        "workspace": str(workspace),
        "libraries": libraries(),
        "key_shapes": [list(shape) for shape in KEY_SHAPES],  # public: refused by the kernel
    }


def secret_names(env: dict[str, str]) -> list[str]:
    """The kernel's environment variables that hold a secret the scrubber knows (vault
    values, model keys): a value holding one of them is never checkpointed."""
    scrub = scrubber()
    return sorted(n for n, v in env.items() if is_secret_length(v) and scrub.scrub(v) != v)


def held_secret(path: Path, scrub: Scrubber) -> bool:
    """Whether a blob's bytes hold a secret the scrubber knows (read as bytes, never
    unpickled, never through a link), searched a MiB at a time: one search over a big blob
    would hold the GIL (the event loop) for as long, and its text twice the blob's memory. The
    pieces overlap by what a secret can span; each after the first starts after a key
    character, so a key's shape is not taken to start where a piece cuts a word (the piece
    before judged it whole)."""
    overlap = scrub.reach()
    before = ""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        while data := file.read(SCAN_PIECE):
            text = data.decode("latin-1")
            piece = f"_{before}{text}" if before else text
            if scrub.scrub(piece) != piece:
                return True
            before = (before + text)[-overlap:]
    return False


def drop_secrets(root: Path, scrub: Scrubber) -> int:
    """Remove the blobs of the pad's checkpoint that hold a secret (the scrubber learnt a new
    one): a restore reports their names as not restored. How many went. A link the pad put
    in the place of a directory or a blob is never followed."""
    blobs = directory(root) / "blobs"
    if not (_real_dir(directory(root)) and _real_dir(blobs)):
        return 0
    dropped = 0
    for path in sorted(blobs.glob("*.pkl")):
        if _is(path, stat.S_ISREG) and held_secret(path, scrub):
            path.unlink(missing_ok=True)
            dropped += 1
    return dropped


def drop_partial(root: Path) -> None:
    """Remove the blobs a stopped kernel left half-written (its temp files: never loaded,
    and they may hold what a scan of finished blobs would have deleted)."""
    with contextlib.suppress(OSError):
        for path in (directory(root) / "blobs").glob(".*.tmp"):
            path.unlink(missing_ok=True)


def delete(root: Path) -> None:
    """Forget the pad's variables (reset): the checkpoint and any set aside go (a link in
    their place is removed, never followed)."""
    _remove(directory(root))
    for entry in _asides(root):
        _remove(entry)


def set_aside(root: Path) -> Path | None:
    """Move a checkpoint that could not be restored out of the way (kept for a person to
    look at, the last few): the next kernel starts empty."""
    source = directory(root)
    if not source.exists():
        return None
    taken = [int(p.name[len(ASIDE_PREFIX) :]) for p in _asides(root)]
    target = root / f"{ASIDE_PREFIX}{max(taken, default=0) + 1}"
    os.rename(source, target)
    for old in sorted(_asides(root), key=lambda p: int(p.name[len(ASIDE_PREFIX) :]))[:-3]:
        _remove(old)
    return target


def _asides(root: Path) -> list[Path]:
    try:
        return [
            entry
            for entry in root.iterdir()
            if entry.name.startswith(ASIDE_PREFIX) and entry.name[len(ASIDE_PREFIX) :].isdigit()
        ]
    except OSError:
        return []


def read_manifest(root: Path) -> dict[str, Any] | None:
    """The current manifest as untrusted data (capped; None when absent, unreadable, too big
    or not an object). Every step is opened without following a link: the pad writes here."""
    try:
        with _opened(directory(root), os.O_DIRECTORY) as base:
            with _opened("HEAD", dir_fd=base) as head_fd:
                head = os.read(head_fd, 32).strip()
            if not head.isdigit():
                return None
            with (
                _opened("manifests", os.O_DIRECTORY, dir_fd=base) as manifests,
                _opened(f"{int(head)}.json", dir_fd=manifests) as fd,
                os.fdopen(os.dup(fd), "rb") as file,
            ):
                data = file.read(MANIFEST_CAP + 1)
        if len(data) > MANIFEST_CAP:
            return None
        manifest = json.loads(data)
    except (OSError, ValueError, RecursionError):
        return None
    return manifest if isinstance(manifest, dict) else None


def head_number(base: Path) -> int | None:
    """The number in a checkpoint directory's ``HEAD`` (None: none, or unreadable)."""
    try:
        with _opened(base, os.O_DIRECTORY) as base_fd:
            return _head_at(base_fd)
    except OSError:
        return None


def _head_at(base_fd: int) -> int | None:
    try:
        with _opened("HEAD", dir_fd=base_fd) as fd:  # never through a link, nor on a FIFO
            head = os.read(fd, 32).strip()
    except OSError:
        return None
    return int(head) if head.isdigit() else None


def _manifest_numbers(manifests_fd: int) -> list[int]:
    names = os.listdir(manifests_fd)
    return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())


def step_back(root: Path) -> tuple[int, int]:
    """Make the manifest before the current one current (a revert): ``HEAD`` moved back,
    the manifests after it deleted (a later revert steps further back, never forward). Only
    files move, each step taken from a descriptor opened without following a link (the pad
    writes here, maybe while this runs). (the cell undone, the cell whose variables are
    current now); InvalidInputError when no earlier manifest is kept."""
    try:
        with (
            _opened(directory(root), os.O_DIRECTORY) as base,
            _opened("manifests", os.O_DIRECTORY, dir_fd=base) as manifests,
        ):
            return _step_back_at(base, manifests)
    except FileNotFoundError:
        raise InvalidInputError(NOTHING_TO_REVERT) from None
    except OSError as exc:
        if exc.errno not in NOT_A_DIRECTORY:
            raise
        raise InvalidInputError(  # a link or a file where its directories go
            f"cannot revert: the pad's checkpoint is damaged ({exc.strerror}); reset the pad"
        ) from None


NOT_A_DIRECTORY = (errno.ELOOP, errno.ENOTDIR, errno.ENOENT)  # none, or a link in its place
NOTHING_TO_REVERT = (
    "nothing to revert: the pad has no checkpoint (no cell changed its variables since it was "
    "made or reset, or its checkpoint was set aside); run cells first"
)


def _step_back_at(base: int, manifests: int) -> tuple[int, int]:
    head = _head_at(base)
    if head is None:
        raise InvalidInputError(NOTHING_TO_REVERT)
    earlier = [number for number in _manifest_numbers(manifests) if number < head]
    if not earlier:
        raise InvalidInputError(
            f"nothing to revert: the variables as they were before cell {head} are not kept "
            "(only the last few checkpoints are, SCRATCHPAD_CHECKPOINT_KEEP; the pad's first "
            "checkpoint has none before it); re-run the cells you need, or reset the pad"
        )
    back = earlier[-1]
    _replace_at(base, "HEAD", str(back).encode())
    for number in _manifest_numbers(manifests):
        if number > back:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{number}.json", dir_fd=manifests)
    return head, back


def _replace_at(dir_fd: int, name: str, data: bytes) -> None:
    """``name`` in the directory ``dir_fd`` replaced atomically (temp file, fsync, rename)."""
    temp = f".{name}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, PRIVATE_FILE_MODE, dir_fd=dir_fd)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    os.fsync(dir_fd)


def copy(source_root: Path, target_root: Path) -> None:
    """Copy a pad's checkpoint into another pad's directory (a fork; blocking I/O): blobs
    hard-linked where the disk allows (content-addressed, replaced never rewritten, and a
    kernel loads one only when its bytes hash to its name: a pad that wrote into a shared
    one loses that value in both, runs nothing in the other), the rest copied, 0600/0700.
    Regular files only, every step taken from a descriptor opened without following a link:
    the source's kernel may still be running, and nothing it put there may make the server
    copy or link a file of its choosing. Opaque bytes: nothing is unpickled."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        base = os.open(directory(source_root), flags)
    except OSError:
        return  # no checkpoint (or not a directory of its own): nothing to copy
    try:
        if _head_at(base) is None:
            return
        target = private_dir(directory(target_root))
        for sub in ("blobs", "manifests"):
            private_dir(target / sub)
            try:
                with _opened(sub, os.O_DIRECTORY, dir_fd=base) as sub_fd:
                    for name in sorted(os.listdir(sub_fd)):
                        if not name.startswith("."):  # a file being written
                            _link_or_copy(sub_fd, name, target / sub / name, link=sub == "blobs")
            except OSError as exc:
                if exc.errno not in NOT_A_DIRECTORY:
                    raise
        for name in ("FORMAT", "HEAD"):
            copy_private(Path(name), target / name, dir_fd=base)
    finally:
        os.close(base)


def _link_or_copy(dir_fd: int, name: str, target: Path, *, link: bool) -> None:
    """Entry ``name`` of the directory ``dir_fd`` to ``target``: a regular file only (a link
    there is linked as a link, then dropped; never followed)."""
    if link:
        try:
            os.link(name, target, src_dir_fd=dir_fd, follow_symlinks=False)
        except OSError as exc:
            if exc.errno in NO_SPACE:
                raise
        else:
            if stat.S_ISREG(target.lstat().st_mode):
                return
            target.unlink()
    copy_private(Path(name), target, dir_fd=dir_fd)


@contextlib.contextmanager
def _opened(path: Path | str, flags: int = 0, *, dir_fd: int | None = None) -> Iterator[int]:
    """A descriptor of ``path`` opened read-only, never through a link (nor blocking on a
    FIFO the pad put there)."""
    extra = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags | extra, dir_fd=dir_fd)
    try:
        yield fd
    finally:
        os.close(fd)


@dataclass
class Restored:
    """How a restore went: ``died``/``timed_out`` mean the kernel is not usable as it is."""

    number: int | None = None
    report: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    died: bool = False
    timed_out: bool = False

    @property
    def broken(self) -> bool:
        return self.died or self.timed_out


async def _ask(
    kernel: KernelProcess,
    message: dict[str, object],
    reply: str,
    timeout: float,
    on_other: Callable[[str, object], None],
) -> tuple[dict[str, Any] | None, str]:
    """Send a request and wait for its answer: (answer, "") or (None, "died"|"timeout")."""
    if not kernel.request(message):
        return None, "died"
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        event = await kernel.next_event(deadline)
        if event is None:
            return None, "timeout"
        kind, payload = event
        if kind == "msg" and isinstance(payload, dict) and payload.get("type") == reply:
            return dict(payload), ""
        if kind == "exit":
            return None, "died"
        on_other(kind, payload)


async def restore(
    kernel: KernelProcess, timeout: float, on_other: Callable[[str, object], None]
) -> Restored:
    """Ask a fresh kernel to load its pad's checkpoint (see inkernel/checkpoint.py)."""
    answer, trouble = await _ask(kernel, {"type": "restore"}, "restored", timeout, on_other)
    if answer is None:
        return Restored(died=trouble == "died", timed_out=trouble == "timeout")
    number = answer.get("number")
    items = answer.get("vars")
    return Restored(
        number=number if isinstance(number, int) else None,
        report=[item for item in items if isinstance(item, dict)]
        if isinstance(items, list)
        else [],
        error=str(answer.get("error") or ""),
    )


async def checkpoint_all(
    kernel: KernelProcess, timeout: float, on_other: Callable[[str, object], None]
) -> dict[str, Any]:
    """Ask an idle kernel for a full sweep (every variable pickled again, hash-compared):
    before it sleeps, is forked, or stops. Its outcome (``{}``: nothing to write)."""
    answer, trouble = await _ask(kernel, {"type": "checkpoint"}, "checkpointed", timeout, on_other)
    if answer is None:
        return {"error": f"the kernel {'died' if trouble == 'died' else 'did not answer'}"}
    ckpt = answer.get("ckpt")
    return ckpt if isinstance(ckpt, dict) else {}


async def flush(
    kernel: KernelProcess, timeout: float, on_other: Callable[[str, object], None]
) -> str:
    """Wait until an idle kernel's checkpoints are on disk (a cell's is written after its
    answer): before the server reads them. '' when done, else what went wrong."""
    answer, trouble = await _ask(kernel, {"type": "flush"}, "flushed", timeout, on_other)
    if answer is None:
        return f"the kernel {'died' if trouble == 'died' else 'did not answer'}"
    return ""


def failure_lines(ckpt: object) -> list[str]:
    """The lines a cell's logs get from its ``done`` frame's checkpoint outcome."""
    if not isinstance(ckpt, dict):
        return []
    lines = []
    failed = ckpt.get("failed")
    if isinstance(failed, dict):
        lines += [f"{name}: not saved ({why})" for name, why in failed.items()]
    late = ckpt.get("late")
    if isinstance(late, list):
        lines += [str(line) for line in late]
    if ckpt.get("error"):
        lines.append(str(ckpt["error"]))
    return lines


def note(restored: Restored, how: str) -> str:
    """What the first cell of the new kernel is told about its variables."""
    if restored.error:
        return (
            f"The kernel {how}; this is a fresh kernel. Its variables could not be restored "
            f"({restored.error}); all variables from before were lost."
        )
    where = f" after cell {restored.number}" if restored.number else ""
    done = [item for item in restored.report if item.get("ok")]
    imports = [str(item["name"]) for item in done if item.get("import")]
    values = [str(item["name"]) for item in done if not item.get("import")]
    failed = [item for item in restored.report if not item.get("ok")]
    parts = [f"The kernel {how}; this is a fresh kernel. It restored the variables saved{where}."]
    if values:
        parts.append(f"Restored: {_names(values)}.")
    if imports:
        parts.append(f"Imports replayed: {_names(imports)}.")
    if failed:
        shown = []
        for item in failed[:NOTE_REASONS]:
            why = str(item.get("why") or "unknown")
            cell = item.get("number")
            rerun = f"; defined in cell {cell}: re-run it" if isinstance(cell, int) else ""
            shown.append(f"{item.get('name')} ({why}{rerun})")
        more = len(failed) - len(shown)
        parts.append("Not restored: " + "; ".join(shown) + (f"; and {more} more" if more else ""))
    if not done and not failed:
        parts.append("There were none.")
    return " ".join(parts)


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:NOTE_NAMES])
    return shown + (f" and {len(names) - NOTE_NAMES} more" if len(names) > NOTE_NAMES else "")


def broken_note(restored: Restored, how: str, aside: Path | None = None) -> str:
    """The note when the restore killed or hung its kernel: the pad starts empty."""
    what = "killed the kernel" if restored.died else "did not finish in time"
    kept = f" (set aside as {aside.name})" if aside is not None else ""
    return (
        f"The kernel {how}; restoring its variables {what}, so this is a fresh kernel with "
        f"none: the checkpoint was set aside{kept}. Re-run the cells that define what you need."
    )


def skipped_note(how: str, aside: Path | None) -> str:
    kept = f" (set aside as {aside.name})" if aside is not None else ""
    return (
        f"The kernel {how}; it died twice in a row, so its variables were not restored "
        f"(a restored value may be the cause): the checkpoint was set aside{kept}."
    )


with contextlib.suppress(Exception):  # found once, at import, like the server's own paths
    libraries()


async def resume(
    kernel: KernelProcess,
    root: Path,
    settings: Settings,
    how: str | None,
    *,
    suspect: bool,
    stop: Callable[[], Awaitable[object]],
    start: Callable[[], Awaitable[object]],
    on_other: Callable[[str, object], None],
) -> str | None:
    """After a kernel start: restore the pad's variables when it has a checkpoint, and say
    what happened (the note for the next cell's logs; None: nothing worth saying).
    ``suspect``: the kernel died twice in a row, so the checkpoint is set aside unread. A
    restore that kills or hangs the kernel sets it aside too (after ``stop``), and ``start``
    gives an empty kernel."""
    lost = None
    if how is not None:
        lost = f"The kernel {how}; this is a fresh kernel (all variables from before were lost)."
    if not settings.checkpoint_pad_mb:
        return lost
    if not await asyncio.to_thread(exists, root):
        why = await asyncio.to_thread(damage, root)
        if why is None:
            return lost
        return (
            f"The kernel {how or 'started again'}; this is a fresh kernel. Its variables could "
            f"not be restored: the pad's checkpoint is damaged ({why}); all variables from "
            "before were lost, and the next cells checkpoint afresh."
        )
    how = how or "stopped with its pad (closed, or the server stopped)"
    if suspect:
        return skipped_note(how, await asyncio.to_thread(set_aside, root))
    restored = await restore(kernel, settings.restore_timeout_s, on_other)
    if not restored.broken:
        return note(restored, how)
    await stop()
    aside = await asyncio.to_thread(set_aside, root)
    await start()
    return broken_note(restored, how, aside)
