"""A pad's own working directory, for a pad whose manager has no bound workspace.

It lives at ``<home>/workspaces/<dir>/`` (``<dir>`` as the pad's directory under ``pads/``,
see names.py), beside the pad's venv rather than in it, so a venv rebuild never touches it
and a reset keeps it. It is made (0700) before each kernel start, since the kernel starts in
it and the sandbox grants it read-write, and removed with the pad. Nothing else of the home
is in it, and no process outside the pad's sandbox runs from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scratchpad.fsutil import private_dir
from scratchpad.padnames import dir_in

log = logging.getLogger(__name__)
WORKSPACES_DIR = "workspaces"


def workspaces_dir(home: Path) -> Path:
    return home / WORKSPACES_DIR


def where_pads_work(home: Path, workspace: Path | str | None) -> Path:
    """Where the pads of a server work, as a person reads it: its bound workspace, or
    ``<home>/workspaces/<pad>`` (each pad in a directory of its own)."""
    return Path(workspace) if workspace is not None else workspaces_dir(home) / "<pad>"


def pad_workdir(home: Path, name: str) -> Path:
    """The working directory of pad ``name`` (never outside ``workspaces/``)."""
    return dir_in(workspaces_dir(home), name)


def ensure(path: Path) -> Path:
    """``path`` as a directory, made 0700 (with ``workspaces/``) when missing."""
    return private_dir(path)


async def remove(path: Path) -> None:
    """Delete a pad's working directory and everything in it, whatever modes its files were
    given; a symbolic link in its place is removed, never followed."""
    if path.is_symlink():
        path.unlink()
        return
    if not path.exists():
        return
    await asyncio.to_thread(remove_tree, path)
    if path.exists():
        log.warning("could not delete all of %s; delete what is left by hand", path)


UNLOCK_PASSES = 3  # a cell's locked directories may nest: each pass unlocks one level more


def remove_tree(path: Path) -> None:
    """``rmtree`` from ``path`` (never following a link: it walks by descriptors), giving
    back to the owner the directories it could not read or write, then again from ``path``.
    Never by the path of what failed: a process of the pad still running (where nothing
    contains its processes) may meanwhile swap a directory on that path for a link out."""
    for attempt in range(UNLOCK_PASSES):
        last = attempt == UNLOCK_PASSES - 1
        shutil.rmtree(path, onerror=_give_up if last else _unlock_around)
        if not path.exists():
            return


def _unlock_around(_func: Callable[..., Any], failed: str, _exc: object) -> None:
    """A cell may leave directories without write or search permission: give them back to
    the owner (the next pass deletes them)."""
    for directory in (os.path.dirname(failed), failed):
        with contextlib.suppress(OSError):
            _unlock(directory)


def _unlock(directory: str) -> None:
    """``u+rwx`` on ``directory``, which must be one (never a symbolic link followed, even
    one swapped in meanwhile: the mode is set on what was opened)."""
    fd = os.open(directory, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        os.chmod(f"/proc/self/fd/{fd}", mode | stat.S_IRWXU)
    finally:
        os.close(fd)


def _give_up(_func: Callable[..., Any], failed: str, exc: object) -> None:
    log.debug("cannot delete %s: %s", failed, exc)
