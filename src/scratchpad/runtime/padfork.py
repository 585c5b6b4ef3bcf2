"""A fork's files: a new pad's directory laid out from another's (blocking I/O), before its
venv is built from the copied requirements (LocalRuntime.fork_into).

What is copied: ``requirements.txt`` (the packages), ``history.jsonl`` (the cells and their
ids: numbering goes on), the checkpoint (the variables; checkpoint.copy: blobs hard-linked)
and the list of reverted cells. What is not: the accept log (no cell of the new pad waits),
the venv itself (built anew), the vault grants (kept by the vault, by pad name: a fork is a
new pad for it). The new pad starts asleep: its first cell restores the variables. Only
files move; nothing is unpickled here.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from scratchpad.fsutil import copy_private, private_dir
from scratchpad.runtime import checkpoint, venv
from scratchpad.runtime.padinfo import HISTORY
from scratchpad.runtime.padstate import PadState, read_state, reverted, set_reverted, write_state

COPIED = (venv.REQUIREMENTS, HISTORY)


def copy_files(source: Path, target: Path, name: str) -> None:
    """Lay out pad ``name``'s directory ``target`` (it must not exist) from ``source``; a
    failure leaves no ``target``."""
    os.mkdir(target, 0o700)
    try:
        for file in COPIED:
            copy_private(source / file, target / file)
        venv.record_name(target, name)
        checkpoint.copy(source, target)
        last = read_state(source).last_activity
        write_state(target, PadState(asleep_since=time.time(), last_activity=last))
        undone = reverted(source)
        if undone:
            set_reverted(target, undone)
        private_dir(target)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # made here, by the server alone
        raise
