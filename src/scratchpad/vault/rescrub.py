"""What is already stored, scrubbed again when a secret is added or rotated.

Text written before the scrubber knew a secret may hold it. :func:`rescrub_home` goes over
everything a home keeps: pad histories (``pads/*/history.jsonl``), the observation store,
and session files (``sessions/*.json`` histories and ``sessions/*.jsonl`` episodic logs).
JSON is scrubbed value by value (a key-shaped string after an escaped newline is caught as it
is in the text itself); a file is rewritten atomically, keeping its mode, only when something
in it changed, and line files are streamed, never loaded whole. Agent directories (``memory/``)
live outside the home and are not covered.

It blocks for as long as the home is large: the manager runs it on a worker thread
(:meth:`ScratchpadManager.rescrub`, which also scrubs running pads' cells in memory and
rewrites their histories under each history's own lock).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from scratchpad.config import Settings
from scratchpad.fsutil import atomic_write_chunks
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.cell import CELL_FIELDS, Cell
from scratchpad.runtime.history import CellHistory
from scratchpad.scrub import Scrubber, scrubber

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
    home: Path,
    *,
    histories: Callable[[Path], bool | None] | None = None,
    observations: Path | None = None,
    scrub: Scrubber | None = None,
) -> RescrubReport:
    """Scrub every file of ``home`` that stores text (see the module) again.

    ``histories`` rewrites one pad's ``history.jsonl`` and says whether it changed, or None
    when it left the file alone (default :func:`rescrub_lines`; the manager passes one that
    leaves running pads' files to them).
    ``observations`` is the store's file (default ``<home>/observations.db``).
    """
    scrub = scrub or scrubber()
    report = RescrubReport(version=scrub.version)
    rewrite: Callable[[Path], bool | None] = histories or (lambda p: rescrub_lines(p, scrub))
    for path in sorted((home / "pads").glob("*/history.jsonl")):
        if not path.parent.is_symlink():
            _rewrite_file(report, path, rewrite)
    sessions = home / "sessions"
    for path in sorted(sessions.glob("*.jsonl")):
        _rewrite_file(report, path, lambda path: rescrub_lines(path, scrub))
    for path in sorted(sessions.glob("*.json")):
        _rewrite_file(report, path, lambda path: rescrub_json_file(path, scrub))
    database = observations or home / "observations.db"
    if database.is_file():
        with ObservationStore(database, settings=Settings.load(home=home)) as store:
            counts = store.rescrub(scrub)
        report.entries_checked, report.entries_changed = counts.checked, counts.changed
    return report


def _rewrite_file(
    report: RescrubReport, path: Path, rewrite: Callable[[Path], bool | None]
) -> None:
    try:
        changed = rewrite(path)
        if changed is not None:
            report.count(changed)
    except FileNotFoundError:  # removed meanwhile (a pad, say): nothing left to scrub
        pass
    except OSError as exc:
        log.warning("could not scrub %s again: %s", path, exc)
        report.failed.append(str(path))


def rescrub_lines(path: Path, scrub: Scrubber | None = None) -> bool:
    """Scrub a JSON-lines file line by line; rewrite it (atomically, its mode kept) only when
    a line changed. Whether it did. Streams: one line in memory at a time."""
    scrub = scrub or scrubber()
    if not lines_need_scrub(path, scrub):
        return False

    def lines() -> Iterator[bytes]:
        with path.open("rb") as handle:
            for line in handle:
                yield scrub_line(line, scrub)

    atomic_write_chunks(path, lines())
    return True


def lines_need_scrub(path: Path, scrub: Scrubber | None = None) -> bool:
    """Whether a line of a JSON-lines file would change (read only, stops at the first)."""
    scrub = scrub or scrubber()
    with path.open("rb") as handle:
        return any(scrub_line(line, scrub) is not line for line in handle)


def rescrub_json_file(path: Path, scrub: Scrubber | None = None) -> bool:
    """Scrub one JSON document (a session history); rewrite it only when it changed."""
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    scrubbed = scrub_json_text(text, scrub or scrubber())
    if scrubbed is text:
        return False
    atomic_write_chunks(path, (_encode(scrubbed),))
    return True


def scrub_line(line: bytes, scrub: Scrubber) -> bytes:
    """One line of a JSON-lines file scrubbed; ``line`` itself when nothing changed."""
    text = line.decode("utf-8", "surrogateescape")
    body = text.rstrip("\r\n")
    scrubbed = scrub_json_text(body, scrub)
    if scrubbed is body:
        return line
    return _encode(scrubbed + text[len(body) :])


def scrub_json_text(text: str, scrub: Scrubber) -> str:
    """JSON text with its values scrubbed (``text`` itself when nothing changed); text that is
    no JSON (a torn last line) is scrubbed as text. Values are decoded first: a secret's
    escaped forms nest (the repr in a cell's code, JSON-escaped once more in the file)."""
    if not text.strip():
        return text
    try:
        data = json.loads(text)
    except ValueError:
        scrubbed = scrub.scrub(text)
        return text if scrubbed == text else scrubbed
    cleaned = _scrub_value(data, scrub)
    if cleaned == data:
        return text
    return json.dumps(cleaned, ensure_ascii=False)


def _scrub_value(value: Any, scrub: Scrubber) -> Any:
    """:meth:`Scrubber.scrub_data`, also inside strings that are JSON themselves (a tool's
    input in the episodic log): their escaped forms nest once more."""
    if isinstance(value, str):
        if value[:1] in ("{", "[") and "\\" in value:
            try:
                inner = json.loads(value)
            except ValueError:
                return scrub.scrub(value)
            cleaned = _scrub_value(inner, scrub)
            if cleaned != inner:
                value = json.dumps(cleaned, ensure_ascii=False)
        return scrub.scrub(value)
    if isinstance(value, dict):
        return {_scrub_value(k, scrub): _scrub_value(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_value(item, scrub) for item in value]
    return value


def scrub_cell(cell: Cell, scrub: Scrubber) -> bool:
    """Scrub a recorded cell in place; whether anything in it changed."""
    changed = False
    for name in CELL_FIELDS:
        value = getattr(cell, name)
        if isinstance(value, str | list | dict):
            cleaned = scrub.scrub_data(value)
            if cleaned != value:
                setattr(cell, name, cleaned)
                changed = True
    return changed


async def rescrub_recorded(
    cells: list[Cell], history: CellHistory, scrub: Scrubber
) -> tuple[int, bool]:
    """A running pad's cells scrubbed in place, and its history file rewritten under the
    history's lock when a line changes (looked at first without the lock, so cells go on
    being recorded meanwhile). How many cells changed, and whether the file did."""
    changed = sum(scrub_cell(cell, scrub) for cell in list(cells))
    try:
        if not await asyncio.to_thread(lines_need_scrub, history.path, scrub):
            return changed, False
    except FileNotFoundError:
        return changed, False
    rewrite = partial(rescrub_lines, scrub=scrub)
    return changed, await asyncio.to_thread(history.rescrub, rewrite)


def _encode(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate JSON decoded from an escape
        return text.encode("utf-8", "replace")
