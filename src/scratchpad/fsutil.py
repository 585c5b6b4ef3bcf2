"""Small file-system helpers shared by every part that keeps state on disk.

Atomic writes (temp file, fsync, rename), exclusive creation (temp file, link), and private
files: the home directory is 0700 and every state file in it 0600, whatever the umask, so
directories and files there are made with :func:`private_dir` and :func:`open_private`.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

NEW_FILE_MODE = 0o666  # what open() asks for; the umask takes its share
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` (UTF-8) atomically; see :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` so that a crash leaves either the old file or the new one, never half.

    Temp file in the same directory, fsync, rename, then fsync of the directory. The file
    gets ``mode`` if given; else a rewritten file keeps its mode, and a new one gets what
    ``open()`` would give it (0o666 less the umask), not the temp file's 0o600.
    """
    atomic_write_chunks(path, (data,), mode=mode)


def atomic_write_chunks(path: Path, chunks: Iterable[bytes], *, mode: int | None = None) -> None:
    """:func:`atomic_write_bytes` of data that comes in pieces (never all in memory at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_temp(path, chunks, mode if mode is not None else _mode_for(path))
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def create_exclusive(path: Path, data: bytes, *, mode: int = 0o600) -> bool:
    """Create ``path`` with ``data`` unless it exists; whether this call created it.

    The whole content is written to a temp file first and then hard-linked to ``path``
    (``link`` fails when the name exists), so of several processes racing, exactly one
    wins, and a reader never sees the file empty or half written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_temp(path, (data,), mode)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    _fsync_dir(path.parent)
    return True


def _write_temp(path: Path, chunks: Iterable[bytes], mode: int) -> str:
    """A synced temp file beside ``path`` holding ``chunks`` with ``mode``; its name."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            for data in chunks:
                handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _fsync_dir(directory: Path) -> None:
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _mode_for(path: Path) -> int:
    """The permission bits of the existing file, else those of a new file."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return NEW_FILE_MODE & ~current_umask()


def current_umask() -> int:
    """The process umask. Read from /proc where Linux has it (nothing changes); elsewhere it
    is set to a strict 0o077 for an instant and put back."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def private_dir(path: Path, *, tighten: bool = False) -> Path:
    """``path``, a directory: every missing component is created 0700, whatever the umask.

    Directories that exist are left as they are, unless ``tighten`` (the home directory at a
    server's start): then ``path`` loses the permissions it gives others, if it is ours.
    """
    missing: list[Path] = []
    current = path
    while not current.is_dir() and current != current.parent:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # made in the meantime by another process
        os.chmod(directory, PRIVATE_DIR_MODE)  # the umask may have taken owner bits
    if tighten:
        _restrict(path.stat(), lambda mode: os.chmod(path, mode))
    return path


def open_private(path: Path, flags: int = APPEND_FLAGS) -> int:
    """A descriptor of ``path`` opened with ``flags``: created 0600 (missing directories 0700),
    and a file that already exists with permissions for others is made 0600."""
    private_dir(path.parent)
    fd = os.open(path, flags | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    try:
        _restrict(os.fstat(fd), lambda mode: os.fchmod(fd, mode))
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_private_append(path: Path) -> BinaryIO:
    """``path`` opened for appending bytes, private as :func:`open_private` makes it."""
    return os.fdopen(open_private(path), "ab")


def touch_private(path: Path) -> None:
    """Create ``path`` empty and 0600 unless it exists (then only its permissions tighten)."""
    os.close(open_private(path, os.O_WRONLY | os.O_CREAT))


def _restrict(info: os.stat_result, chmod: Callable[[int], None]) -> None:
    """Take the group's and others' permissions away, if the file is ours and has any."""
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077 and info.st_uid == os.getuid():
        chmod(mode & 0o700)
