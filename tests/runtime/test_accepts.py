"""The accept log (runtime/accepts.py): what a killed server leaves behind is recorded killed,
never more; the log stays bounded; the one repeat rule."""

from __future__ import annotations

import stat
import time
from dataclasses import replace
from pathlib import Path

import pytest

from scratchpad.errors import CellIdReusedError, InvalidInputError
from scratchpad.runtime import accepts, checkpoint
from scratchpad.runtime.accepts import Accepted, AcceptLog, check_repeat, load_recovered
from scratchpad.runtime.cell import Cell
from scratchpad.runtime.history import CellHistory
from scratchpad.scrub import scrubber


def history_with(root: Path, *numbers: int) -> CellHistory:
    history = CellHistory(root / "history.jsonl", 10**6)
    for number in numbers:
        history.append(Cell(code="1", id=f"c{number}", number=number))
    history.close()
    return history


def test_only_cells_accepted_by_a_dead_server_and_never_recorded_become_killed(
    tmp_path: Path,
) -> None:
    history = history_with(tmp_path, 5, 6)
    log = AcceptLog(tmp_path)
    for cell_id, number in (("c3", 3), ("c6", 6), ("lost", 7), ("also", 8)):
        log.append(Accepted(cell_id, "h", time.time(), number, "an earlier server"))
    log.append(Accepted("mine", "h", time.time(), 9, accepts.BOOT))  # this server's: on its way
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    cells = load_recovered(history)
    killed = [cell for cell in cells if cell.status == "killed"]
    assert [(c.id, c.number) for c in killed] == [("lost", 7), ("also", 8)]  # c3: folded away
    assert "not run again" in (killed[0].error or "")
    again = load_recovered(CellHistory(tmp_path / "history.jsonl", 10**6))
    assert [c.id for c in again] == ["c5", "c6", "lost", "also"]  # recorded once, on disk


def test_a_killed_cell_says_what_the_checkpoint_brings_back(tmp_path: Path) -> None:
    """Its variables were lost with its kernel, unless the pad has a checkpoint: then those
    of the last finished cell come back."""
    for name, with_checkpoint in (("without", False), ("with", True)):
        root = tmp_path / name
        root.mkdir()
        if with_checkpoint:
            checkpoint.prepare(root)
            (checkpoint.directory(root) / "HEAD").write_text("1")
        AcceptLog(root).append(Accepted("gone", "h", time.time(), 1, "an earlier server"))
        (cell,) = load_recovered(history_with(root))
        error = cell.error or ""
        assert error.startswith(accepts.KILLED)
        if with_checkpoint:
            assert "restores the variables saved after the last finished cell" in error
        else:
            assert "were lost with its kernel" in error


def test_a_reset_forgets_the_log(tmp_path: Path) -> None:
    log = AcceptLog(tmp_path)
    log.append(Accepted("a", "h", time.time(), 1, "earlier"))
    log.clear()
    assert load_recovered(history_with(tmp_path)) == []


def test_the_log_keeps_its_newest_entries_within_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(accepts, "MAX_BYTES", 2000)
    log = AcceptLog(tmp_path)
    for number in range(1, 60):
        log.append(Accepted(f"id{number}", "h", float(number), number, "b"))
    entries = log.load()
    assert log.path.stat().st_size <= 2000 and "id59" in entries and "id1" not in entries


def test_a_repeat_is_the_same_payload_or_refused() -> None:
    check_repeat("x", "1", known_code="1", sha="a", known_sha="a")
    check_repeat("x", "1", known_code="1", known_sha=None)  # no hash known: by its code
    with pytest.raises(CellIdReusedError, match="already names a cell with other code"):
        check_repeat("x", "1", known_code="1", sha="a", known_sha="b")
    with pytest.raises(InvalidInputError):
        check_repeat("x", "2", known_code="1", known_sha=None)


def test_a_cell_recovered_killed_shows_its_code_scrubbed_and_capped(tmp_path: Path) -> None:
    secret = "s3cret-of-the-accept-log"
    scrubber().add(secret, "DS_ACCEPT__TOKEN")
    history = history_with(tmp_path)
    log = AcceptLog(tmp_path)
    long_code = f"key = {secret!r}\n" + "x = 1\n" * 10_000 + "print('end')"
    entry = accepts.entry_of("lost", "h", 1, long_code)
    log.append(replace(entry, boot="an earlier server"))
    (killed,) = load_recovered(history)
    assert killed.status == "killed" and killed.code.startswith("key = '[DS_ACCEPT__TOKEN]'")
    assert killed.code.endswith("print('end')") and "characters cut" in killed.code
    assert len(killed.code) < accepts.CODE_CHARS + 100
    assert secret not in log.path.read_text()
