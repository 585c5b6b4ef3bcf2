"""What a home stores, scrubbed again once the scrubber has learnt a secret (the vault tells
its listeners of every change; :meth:`ScratchpadManager.rescrub` answers).

Each store scrubs its own: a pad's history through its :class:`CellHistory` (a running pad
through its runtime, which also scrubs the cells it holds), the observation store through
:meth:`ObservationStore.rescrub`, and session files (``sessions/*.json`` histories and
``sessions/*.jsonl`` episodic logs) as stored JSON text (:mod:`scratchpad.scrub.stored`).
Agent directories (``memory/``) live outside the home and are not covered.

It blocks for as long as the home is large: call it on a worker thread.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from scratchpad.config import Settings
from scratchpad.errors import ScratchpadError
from scratchpad.runtime import checkpoint
from scratchpad.runtime.cell import CELL_FIELDS, Cell
from scratchpad.runtime.history import CellHistory
from scratchpad.runtime.padinfo import HISTORY
from scratchpad.scrub import Scrubber, scrub_bundle, scrubber
from scratchpad.scrub.stored import rescrub_json_file, rescrub_lines

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RescrubReport:
    """What one re-scrub looked at and what it changed."""

    version: int = 0  # the scrubber's version it scrubbed with
    files_checked: int = 0
    files_changed: int = 0
    entries_checked: int = 0  # text entries of the observation store
    entries_changed: int = 0
    cells_changed: int = 0  # cells in memory of running pads
    failed: list[str] = field(default_factory=list)  # files (or pads) not rewritten

    def count(self, changed: bool) -> None:
        self.files_checked += 1
        self.files_changed += changed


def rescrub_home(
    settings: Settings,
    *,
    histories: Collection[Path] | None = None,
    scrub: Scrubber | None = None,
) -> RescrubReport:
    """Scrub everything ``settings.home`` stores (see the module) again.

    ``histories`` are the pad histories to rewrite (default: every one under the home; the
    manager leaves running pads' to their runtimes).
    """
    scrub = scrub or scrubber()
    report = RescrubReport(version=scrub.version)
    for path in sorted((settings.home / "pads").glob(f"*/{HISTORY}")):
        if not path.parent.is_symlink() and (histories is None or path in histories):
            history = CellHistory(path, settings.history_max_bytes)
            _rewrite_file(report, path, partial(rescrub_history, history, scrub))
    for root in sorted((settings.home / "pads").glob("*/")):
        if not root.is_symlink():  # checkpoints are pickles: what holds a secret goes
            try:
                report.files_changed += checkpoint.drop_secrets(root, scrub)
            except OSError as exc:
                log.warning("could not check the checkpoint of %s for secrets: %s", root, exc)
                report.failed.append(str(root))
    sessions = settings.home / "sessions"
    for path in sorted(sessions.glob("*.jsonl")):
        _rewrite_file(report, path, partial(rescrub_lines, path, scrub))
    for path in sorted(sessions.glob("*.json")):
        _rewrite_file(report, path, partial(rescrub_json_file, path, scrub))
    if settings.observations_path.is_file():
        _rescrub_observations(report, settings, scrub)
    return report


def _rescrub_observations(report: RescrubReport, settings: Settings, scrub: Scrubber) -> None:
    """The observation store scrubbed again; a store that cannot be (a damaged file, a full
    disk) is logged and listed as failed, and the rest of the home is scrubbed all the same."""
    from scratchpad.observations.store import ObservationStore  # only where there is one

    path = settings.observations_path
    try:
        with ObservationStore(path, settings=settings) as store:
            counts = store.rescrub(scrub)
    except (sqlite3.Error, ScratchpadError, OSError) as exc:
        log.error(
            "could not scrub the observation store %s again (%s): what it stored before may "
            "still hold the new secret; if the file is damaged, move it aside (a new store is "
            "made in its place)",
            path,
            exc,
        )
        report.failed.append(str(path))
        return
    report.entries_checked, report.entries_changed = counts.checked, counts.changed


def rescrub_history(history: CellHistory, scrub: Scrubber) -> bool:
    """A pad's stored cells scrubbed again; whether its file changed."""
    return history.rescrub(partial(scrub_cell, scrub))


def _rewrite_file(report: RescrubReport, path: Path, rewrite: Callable[[], bool]) -> None:
    try:
        report.count(rewrite())
    except FileNotFoundError:  # removed meanwhile (a pad, say): nothing left to scrub
        pass
    except OSError as exc:
        log.warning("could not scrub %s again: %s", path, exc)
        report.failed.append(str(path))


def scrub_cell(scrub: Scrubber, cell: Cell) -> bool:
    """Scrub a recorded cell in place (its displays as a display is: images kept, their text
    chunks stripped); whether anything in it changed."""
    changed = False
    for name in CELL_FIELDS:
        value = getattr(cell, name)
        cleaned: Any
        if name in ("stdout", "stderr") and cell.outputs_at:  # the outputs' places move too
            column = 0 if name == "stdout" else 1
            places = [at[column] for at in cell.outputs_at]
            cleaned, moved = scrub.scrub_marked(value, places)
            if moved != places:
                for at, place in zip(cell.outputs_at, moved, strict=True):
                    at[column] = place
                changed = True
        elif name == "outputs":
            cleaned = [scrub_bundle(bundle, scrub) for bundle in value]
        elif name == "result_data":
            cleaned = scrub_bundle(value, scrub) if value else value
        elif isinstance(value, str | list | dict):
            cleaned = scrub.scrub_data(value)
        else:
            continue
        if cleaned != value:
            setattr(cell, name, cleaned)
            changed = True
    return changed
