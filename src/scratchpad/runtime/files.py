"""A pad's workspace files, for people (web UI, HTTP, CLI): list one directory, read a file,
write one atomically, delete a file or an empty directory.

Paths are relative to the workspace and '/'-separated. Nothing outside the workspace is ever
reached (absolute paths, ``..`` and symbolic links that lead out are refused) and nothing in
the Scratchpad home is ever listed or reached when the workspace holds it (vault, API key,
pads' environments). Symbolic links are resolved before the check, and what was opened is
checked again afterwards (``/proc/self/fd``), so a pad that swaps a directory for a link
meanwhile cannot redirect a read, a write or a delete. Every call blocks on the disk: the
server runs them on worker threads.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scratchpad.errors import (
    FileTooLargeError,
    InvalidInputError,
    WorkspaceConflictError,
    WorkspaceError,
    WorkspaceFileNotFoundError,
)
from scratchpad.fsutil import NO_SPACE, AtomicFile, disk_full
from scratchpad.scrub import scrub
from scratchpad.text import find_control

if TYPE_CHECKING:
    from scratchpad.runtime.manager import ScratchpadManager

MAX_ENTRIES = 1000  # entries of one listing
MAX_SCAN = 100_000  # directory entries read for one listing
MAX_PATH_CHARS = 4096
TOP = "the workspace's top directory"
Found = tuple[str, str, os.DirEntry[str]]  # name, kind, entry


def clean_path(path: object) -> str:
    """``path`` as a normal relative path ('' for the top): no empty or '.' parts; absolute
    paths, '..' and control characters are refused."""
    if not isinstance(path, str):
        raise InvalidInputError(f"a file path must be text, not {type(path).__name__}")
    if len(path) > MAX_PATH_CHARS:
        raise InvalidInputError(f"the path has {len(path)} characters; at most {MAX_PATH_CHARS}")
    bad = find_control(path)
    if bad is not None:
        raise InvalidInputError(
            f"the path {path!r} holds {bad.group()!r} at position {bad.start()}; control "
            "characters cannot be used in workspace paths"
        )
    if path.startswith("/"):
        raise InvalidInputError(
            f"{path!r} is absolute; give a path relative to the workspace, e.g. 'data/out.csv'"
        )
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise InvalidInputError(f"{path!r} holds '..'; give a path inside the workspace")
    return "/".join(parts)


@dataclass(frozen=True, slots=True)
class Workspace:
    """The files under ``root`` (a real path), less the ``hidden`` directories (real paths)."""

    root: Path
    hidden: tuple[Path, ...] = ()

    @classmethod
    def of(cls, root: Path, hidden: Iterable[Path] = ()) -> Workspace:
        """``hidden`` directories that hold ``root`` (the home around a pad's own directory)
        hide nothing more than the root's bounds already do, so they are left out."""
        top = Path(os.path.realpath(root))
        real = [Path(os.path.realpath(path)) for path in hidden]
        return cls(top, tuple(home for home in real if not _within(top, home)))

    # -- where a path leads -------------------------------------------------------------------
    def locate(self, rel: str) -> Path:
        """The real path ``rel`` (already clean) leads to, checked; it may not exist."""
        try:
            real = Path(os.path.realpath(self.root / rel))
        except OSError as exc:  # a link loop, or links changing while they are followed
            raise WorkspaceConflictError(
                f"{rel or TOP!r} cannot be followed ({exc.strerror}); try again"
            ) from None
        self._check(real, rel)
        return real

    def _check(self, real: Path, rel: str) -> None:
        shown = rel or TOP
        if not _within(real, self.root):
            raise InvalidInputError(
                f"{shown!r} leads outside the workspace (a symbolic link); only files inside "
                "it can be used"
            )
        if any(_within(real, home) for home in self.hidden):
            raise InvalidInputError(
                f"{shown!r} is inside the Scratchpad home (vault, keys, pads' environments), "
                "which is never listed or served; choose a path outside it"
            )

    def _allowed(self, real: Path) -> bool:
        return _within(real, self.root) and not any(_within(real, h) for h in self.hidden)

    def _check_fd(self, fd: int, rel: str) -> None:
        """Where an open descriptor really is (Linux), checked like a path."""
        with contextlib.suppress(OSError):
            self._check(Path(os.readlink(f"/proc/self/fd/{fd}")), rel)

    # -- listing ------------------------------------------------------------------------------
    def listing(self, path: str = "", limit: int = MAX_ENTRIES) -> dict[str, Any]:
        """One directory level: directories first, then files, each by name; at most
        ``limit`` entries (``truncated`` says when more were there). Links that lead out,
        the home, other kinds of files and names that cannot be used as paths are left out."""
        rel = clean_path(path)
        real = self.locate(rel)
        if not real.exists():
            raise WorkspaceFileNotFoundError(f"there is no directory {rel!r} in the workspace")
        if not real.is_dir():
            raise WorkspaceConflictError(f"{rel!r} is a file; list its directory instead")
        found, truncated = self._scan(real)
        found.sort(key=lambda item: (item[1] != "dir", item[0].casefold(), item[0]))
        entries = []
        for name, kind, entry in found[:limit]:
            described = _describe(name, kind, entry, f"{rel}/{name}" if rel else name)
            if described is not None:
                entries.append(described)
        return {"path": rel, "entries": entries, "truncated": truncated or len(found) > limit}

    def _scan(self, real: Path) -> tuple[list[Found], bool]:
        found: list[Found] = []
        with os.scandir(real) as scan:
            for count, entry in enumerate(scan):
                if count >= MAX_SCAN:
                    return found, True
                kind = self._kind(entry)
                if kind is not None and _usable_name(entry.name):
                    found.append((entry.name, kind, entry))
        return found, False

    def _kind(self, entry: os.DirEntry[str]) -> str | None:
        """'dir', 'file', or None for what a listing leaves out."""
        try:
            if entry.is_symlink() and not self._allowed(Path(os.path.realpath(entry.path))):
                return None
            if not entry.is_symlink() and not self._allowed(Path(entry.path)):
                return None
            if entry.is_dir():
                return "dir"
            return "file" if entry.is_file() else None
        except OSError:
            return None

    # -- reading ------------------------------------------------------------------------------
    def open_file(self, path: str) -> tuple[int, int]:
        """A descriptor of the regular file at ``path`` opened for reading, and its size; the
        caller closes it."""
        rel = _file_path(path, "read")
        real = self.locate(rel)
        try:  # non-blocking: a FIFO left in the workspace must not hang a reader
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise WorkspaceFileNotFoundError(f"there is no file {rel!r} in the workspace") from None
        except OSError as exc:
            raise WorkspaceError(f"cannot read {rel!r}: {exc.strerror}; try again") from None
        try:
            self._check_fd(fd, rel)
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise WorkspaceConflictError(f"{rel!r} is a directory; list it instead")
            if not stat.S_ISREG(info.st_mode):
                raise WorkspaceConflictError(f"{rel!r} is not a regular file; it cannot be read")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd, info.st_size

    # -- writing ------------------------------------------------------------------------------
    def upload(self, path: str, limit: int) -> Upload:
        """A new content for the file at ``path`` (parents created), written in pieces; it
        replaces the file only on :meth:`Upload.commit`. A directory is never replaced."""
        rel = _file_path(path, "write")
        real = self.locate(rel)
        if real.is_dir():
            raise WorkspaceConflictError(
                f"{rel!r} is a directory; a file cannot replace it (choose another name)"
            )
        try:
            self._make_parents(real.parent.relative_to(self.root))
            file = AtomicFile(real)
        except (FileExistsError, NotADirectoryError):
            raise WorkspaceConflictError(
                f"a part of {rel!r} is a file, not a directory; choose another path"
            ) from None
        except OSError as exc:
            if exc.errno in NO_SPACE:
                raise disk_full(self.root, exc.errno) from None
            raise WorkspaceError(f"cannot write {rel!r}: {exc.strerror}") from None
        try:
            self._check_fd(file.dir_fd, rel)
        except BaseException:
            file.abort()
            raise
        return Upload(rel, file, limit)

    def _make_parents(self, parents: Path) -> None:
        """Create the directories ``parents`` (resolved, relative to the root) one at a time
        from the root's descriptor, never through a symbolic link: one swapped in meanwhile
        cannot send them elsewhere (it makes the upload fail instead)."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in parents.parts:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
                flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
                try:
                    child = os.open(part, flags, dir_fd=fd)
                except OSError as exc:
                    if exc.errno != errno.ELOOP:
                        raise
                    raise NotADirectoryError(exc.errno, "a symbolic link", part) from None
                os.close(fd)
                fd = child
        finally:
            os.close(fd)

    # -- deleting -----------------------------------------------------------------------------
    def delete(self, path: str) -> str:
        """Delete the file (or symbolic link, or empty directory) at ``path``; its clean path."""
        rel = clean_path(path)
        if not rel:
            raise InvalidInputError(f"{TOP} cannot be deleted; give a file's path")
        parent_rel, _, name = rel.rpartition("/")
        self.locate(rel)  # where it leads is allowed
        parent = self.locate(parent_rel)
        try:
            fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            raise WorkspaceFileNotFoundError(f"there is no {rel!r} in the workspace") from None
        try:
            self._check_fd(fd, parent_rel)
            _remove(fd, name, rel)
            os.fsync(fd)
        finally:
            os.close(fd)
        return rel


class Upload:
    """One file being written: :meth:`write` its pieces (over ``limit`` bytes raises
    FileTooLargeError), then :meth:`commit`, or :meth:`abort` (nothing changes)."""

    def __init__(self, rel: str, file: AtomicFile, limit: int) -> None:
        self.path = rel
        self.size = 0
        self.limit = limit
        self._file = file

    def write(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit:
            raise FileTooLargeError(
                f"the upload of {self.path!r} is over the {self.limit}-byte limit "
                "(SCRATCHPAD_MAX_UPLOAD_BYTES); send a smaller file or raise the limit"
            )
        self._file.write(data)

    def commit(self) -> bool:
        """Put the file in place; whether it was created (else replaced)."""
        file = self._file
        try:
            os.stat(file.name, dir_fd=file.dir_fd, follow_symlinks=False)
            created = False
        except FileNotFoundError:
            created = True
        try:
            file.commit()
        except IsADirectoryError:
            raise WorkspaceConflictError(
                f"{self.path!r} became a directory meanwhile; a file cannot replace it"
            ) from None
        finally:
            file.abort()
        return created

    def abort(self) -> None:
        self._file.abort()


def workspace(manager: ScratchpadManager, name: str) -> Workspace:
    """The workspace of pad ``name``, its home hidden (PadNotFoundError for no such pad)."""
    return Workspace.of(manager.workspace_of(name), hidden=(manager.settings.home,))


def _file_path(path: str, doing: str) -> str:
    rel = clean_path(path)
    if not rel:
        raise WorkspaceConflictError(f"{TOP} is a directory; give the path of a file to {doing}")
    return rel


def _within(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def _usable_name(name: str) -> bool:
    """A name a client can send back (no control character, no undecodable byte) and that
    shows no secret value."""
    return find_control(name) is None and scrub(name) == name


def _describe(name: str, kind: str, entry: os.DirEntry[str], path: str) -> dict[str, Any] | None:
    try:
        info = entry.stat()
    except OSError:  # gone meanwhile
        return None
    modified = datetime.fromtimestamp(info.st_mtime, UTC).isoformat(timespec="seconds")
    return {
        "name": name,
        "path": path,
        "type": kind,
        "size": info.st_size if kind == "file" else None,
        "modified": modified.replace("+00:00", "Z"),
    }


def _remove(dir_fd: int, name: str, rel: str) -> None:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            os.rmdir(name, dir_fd=dir_fd)
        else:
            os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        raise WorkspaceFileNotFoundError(f"there is no {rel!r} in the workspace") from None
    except OSError as exc:
        if exc.errno == errno.ENOTEMPTY:
            raise WorkspaceConflictError(
                f"the directory {rel!r} is not empty; delete its files first"
            ) from None
        raise WorkspaceError(f"cannot delete {rel!r}: {exc.strerror}") from None
