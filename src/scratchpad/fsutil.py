"""Small file-system helpers shared by every part that keeps state on disk."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

NEW_FILE_MODE = 0o666  # what open() asks for; the umask takes its share


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` (UTF-8) atomically; see :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` so that a crash leaves either the old file or the new one, never half.

    Temp file in the same directory, fsync, rename, then fsync of the directory. The file
    gets ``mode`` if given; else a rewritten file keeps its mode, and a new one gets what
    ``open()`` would give it (0o666 less the umask), not the temp file's 0o600.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_temp(path, data, mode if mode is not None else _mode_for(path))
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
    tmp = _write_temp(path, data, mode)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    _fsync_dir(path.parent)
    return True


def _write_temp(path: Path, data: bytes, mode: int) -> str:
    """A synced temp file beside ``path`` holding ``data`` with ``mode``; its name."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
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
