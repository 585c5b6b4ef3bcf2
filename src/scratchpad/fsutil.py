"""Small file-system helpers shared by every part that keeps state on disk.

Atomic writes (temp file, fsync, rename), exclusive creation (temp file, link), appends that
land whole or not at all, and private files: the home directory is 0700 and every state file
in it 0600, whatever the umask, so directories and files there are made with
:func:`private_dir` and :func:`open_private`.

A write that finds its disk full (``ENOSPC``, or ``EDQUOT`` past a quota) raises
:class:`DiskFullError`, whose message names the directory: the one written here, or the
home (or agent directory, workspace) when a caller that knows it wraps the work in
:func:`disk_full_in`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from scratchpad.errors import DiskFullError

NEW_FILE_MODE = 0o666  # what open() asks for; the umask takes its share
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})  # what a write says when its disk is full


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that found no space (or no quota) left."""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE


def disk_full(where: Path | str, code: int = errno.ENOSPC) -> DiskFullError:
    """The error of a write that found the disk holding ``where`` full."""
    reason = os.strerror(code).lower()
    return DiskFullError(
        f"the disk of {where} is full ({reason}); free some space there, then try again", code
    )


@contextlib.contextmanager
def disk_full_in(where: Path) -> Iterator[None]:
    """Inside: a write that finds its disk full raises :class:`DiskFullError` naming
    ``where`` (the directory a person knows: the home, an agent's directory)."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in NO_SPACE:
            raise
        raise disk_full(where, exc.errno) from exc


def append_whole(fd: int, data: bytes, size: int | None = None) -> None:
    """Append ``data`` to the ``O_APPEND`` file ``fd`` whole or not at all: a write that stops
    part-way (a full disk writes what fits, then fails) is cut back to where it began (the
    file's ``size``, when the caller knows it), so the next append starts on a clean end.
    Appends to one file take turns (the caller's lock)."""
    start = os.fstat(fd).st_size if size is None else size
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        if len(view) < len(data):
            with contextlib.suppress(OSError):  # the readers skip a torn record anyway
                os.ftruncate(fd, start)
        raise


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
    with AtomicFile(path, mode=mode) as file:
        for data in chunks:
            file.write(data)
        file.commit()


def create_exclusive(path: Path, data: bytes, *, mode: int = 0o600) -> bool:
    """Create ``path`` with ``data`` unless it exists; whether this call created it.

    The whole content is written to a temp file first and then hard-linked to ``path``
    (``link`` fails when the name exists), so of several processes racing, exactly one
    wins, and a reader never sees the file empty or half written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with AtomicFile(path, mode=mode) as file:
        file.write(data)
        return file.link()


class AtomicFile:
    """A file written in pieces that appears at ``path`` whole, or not at all: a temp file
    in the same directory, fsync, then a rename (:meth:`commit`) or a hard link that fails
    when the name exists (:meth:`link`), then fsync of the directory. Leaving the ``with``
    block without either removes the temp file.

    Everything happens relative to the directory opened here, once: a directory renamed or
    swapped for a symlink meanwhile cannot redirect the write, and ``dir_fd`` lets a caller
    check where that directory really is. The file gets ``mode`` if given; else a rewritten
    file keeps its mode, and a new one gets what ``open()`` would give it.
    """

    def __init__(self, path: Path, *, mode: int | None = None) -> None:
        self.name = path.name
        self.directory = path.parent
        self.dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._temp = ""
        try:
            with disk_full_in(self.directory):
                self._temp, fd = self._open_temp()
            self._handle = os.fdopen(fd, "wb")
            os.fchmod(fd, mode if mode is not None else self._mode())
        except BaseException:
            self.abort()
            raise

    def _open_temp(self) -> tuple[str, int]:
        stem = self.name.encode()[:100].decode(errors="ignore")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        while True:
            temp = f".{stem}.{secrets.token_hex(6)}.tmp"
            try:
                return temp, os.open(temp, flags, PRIVATE_FILE_MODE, dir_fd=self.dir_fd)
            except FileExistsError:
                continue

    def _mode(self) -> int:
        """The permission bits of the existing file, else those of a new file."""
        try:
            return stat.S_IMODE(os.stat(self.name, dir_fd=self.dir_fd).st_mode)
        except FileNotFoundError:
            return NEW_FILE_MODE & ~current_umask()

    def write(self, data: bytes) -> None:
        with disk_full_in(self.directory):
            self._handle.write(data)

    def commit(self) -> None:
        """Put the file in place, over whatever file had its name."""
        with disk_full_in(self.directory):
            self._sync()
            os.replace(self._temp, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        self._finish()

    def link(self) -> bool:
        """Put the file in place unless the name exists; whether it was put there."""
        try:
            with disk_full_in(self.directory):
                self._sync()
                os.link(self._temp, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        except FileExistsError:
            return False
        finally:
            os.unlink(self._temp, dir_fd=self.dir_fd)
            self._temp = ""
        self._finish()
        return True

    def _sync(self) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()

    def _finish(self) -> None:
        self._temp = ""
        os.fsync(self.dir_fd)
        self.abort()  # nothing left to remove: closes the directory

    def abort(self) -> None:
        """Remove the temp file (if any) and let go of the directory; safe to call twice."""
        handle = getattr(self, "_handle", None)
        if handle is not None:
            with contextlib.suppress(OSError):  # its flush failed (a full disk): fd closed anyway
                handle.close()
        if self._temp:
            with contextlib.suppress(OSError):
                os.unlink(self._temp, dir_fd=self.dir_fd)
            self._temp = ""
        if self.dir_fd >= 0:
            os.close(self.dir_fd)
            self.dir_fd = -1

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()


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


def append_private(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (private, as :func:`open_private` makes it) whole or not
    at all (:func:`append_whole`); a full disk raises DiskFullError naming its directory."""
    with disk_full_in(path.parent):
        fd = open_private(path)
        try:
            append_whole(fd, data)
        finally:
            os.close(fd)


def open_private_append(path: Path) -> BinaryIO:
    """``path`` opened for appending bytes, private as :func:`open_private` makes it."""
    return os.fdopen(open_private(path), "ab")


def touch_private(path: Path) -> None:
    """Create ``path`` empty and 0600 unless it exists (then only its permissions tighten).

    An existing file is never opened: closing any descriptor of a file drops every POSIX
    lock the process holds on it, SQLite's too (a database this process has open would lose
    its locks, and another process could then delete its WAL under it)."""
    try:
        os.close(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        _restrict(path.stat(), lambda mode: os.chmod(path, mode))


def _restrict(info: os.stat_result, chmod: Callable[[int], None]) -> None:
    """Take the group's and others' permissions away, if the file is ours and has any."""
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077 and info.st_uid == os.getuid():
        chmod(mode & 0o700)


def copy_private(source: Path, target: Path, *, dir_fd: int | None = None) -> bool:
    """Copy the regular file ``source`` (relative to the directory ``dir_fd`` when given) to
    the new file ``target`` (0600, whatever the umask), never through a symbolic link at
    either end (a pad's own directory: what it left there must not make the server copy a
    file of its choosing). False when ``source`` is missing or not a regular file."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(source, flags, dir_fd=dir_fd)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return False
        raise
    with open(fd, "rb") as reader:
        if not stat.S_ISREG(os.fstat(reader.fileno()).st_mode):
            return False
        made = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with open(made, "wb") as writer:
            while chunk := reader.read(1 << 20):
                writer.write(chunk)
    return True
