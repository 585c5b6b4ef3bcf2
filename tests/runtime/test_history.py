"""A pad's history file: framed records (length + CRC-32), appends whole or not at all, and a
loader that keeps every whole record around torn bytes and reads files of earlier versions."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from scratchpad import fsutil
from scratchpad.errors import DiskFullError
from scratchpad.runtime.cell import Cell
from scratchpad.runtime.history import CellHistory, encode, frame, unframe, unrecorded
from scratchpad.runtime.rescrub import rescrub_history
from scratchpad.scrub import Scrubber

LIMIT = 1 << 20


def cells(count: int) -> list[Cell]:
    return [Cell(code=f"{i} * 2", stdout=f"out {i}\n", result=str(i * 2)) for i in range(count)]


def written(path: Path, records: list[Cell]) -> CellHistory:
    history = CellHistory(path, LIMIT)
    for cell in records:
        history.append(cell)
    history.close()
    return history


def codes(path: Path) -> list[str]:
    return [cell.code for cell in CellHistory(path, LIMIT).load()]


def test_a_record_carries_its_length_and_checksum(tmp_path: Path) -> None:
    cell = Cell(code="print('é\\n')", stdout="é\n", id="abc")
    line = encode(cell)
    body, torn = unframe(line)
    assert body is not None and not torn
    assert line == frame(body) and line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(body) == cell.to_dict()
    header = line[: line.index(b"{")].split()
    assert header[1] == str(len(body)).encode()  # ["#1", length, crc]


def test_a_changed_byte_or_a_cut_record_is_no_record() -> None:
    line = encode(Cell(code="x = 1", stdout="hello"))
    assert unframe(line.replace(b"hello", b"hellp"))[0] is None  # the checksum
    assert unframe(line[:-5] + b"\n")[0] is None  # the length
    assert unframe(line[:-1])[0] is not None  # whole, its newline not yet written


def test_a_torn_tail_is_skipped_and_every_whole_record_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "history.jsonl"
    written(path, cells(3))
    with path.open("ab") as handle:
        handle.write(encode(Cell(code="torn"))[:40])  # a crash mid-append
    with caplog.at_level("WARNING"):
        assert codes(path) == ["0 * 2", "1 * 2", "2 * 2"]
    assert "skipped 1 unreadable line" in caplog.text


def test_a_record_written_after_torn_bytes_on_the_same_line_is_kept(tmp_path: Path) -> None:
    """What main lost: the next record landed on the torn line and both were dropped."""
    path = tmp_path / "history.jsonl"
    written(path, cells(2))
    with path.open("ab") as handle:
        handle.write(encode(Cell(code="torn"))[:40])
    written(path, [Cell(code="after")])
    written(path, [Cell(code="later")])
    assert codes(path) == ["0 * 2", "1 * 2", "after", "later"]


def test_torn_bytes_of_an_old_plain_json_line_before_a_record_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(b'{"code": "cut off in the mid' + encode(Cell(code="whole")))
    assert codes(path) == ["whole"]


def test_a_file_of_an_earlier_version_reads_as_it_is_and_takes_new_records(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.jsonl"
    old = cells(2)
    path.write_text("".join(json.dumps(cell.to_dict()) + "\n" for cell in old), "utf-8")
    assert codes(path) == ["0 * 2", "1 * 2"]
    written(path, [Cell(code="new")])
    assert codes(path) == ["0 * 2", "1 * 2", "new"]


def test_a_failed_append_is_cut_back_and_the_next_one_lands_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk writes what fits, then fails: the part written is taken back."""
    path = tmp_path / "history.jsonl"
    history = CellHistory(path, LIMIT, disk=tmp_path)
    history.append(Cell(code="before"))
    before = path.read_bytes()
    real_write = os.write
    calls = 0

    def full_disk(fd: int, data: bytes) -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            return real_write(fd, bytes(data[:25]))  # what fitted
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(DiskFullError, match=f"the disk of {tmp_path} is full"):
        history.append(Cell(code="x" * 100))
    monkeypatch.undo()
    assert path.read_bytes() == before
    history.append(Cell(code="after"))  # the descriptor is opened again
    history.close()
    assert codes(path) == ["before", "after"]


def test_an_unrecorded_cell_is_never_ok_and_says_why() -> None:
    ran = Cell(code="1", result="1")
    unrecorded(ran, fsutil.disk_full(Path("/the/home")))
    assert ran.status == "error" and ran.result == "1"
    assert (
        ran.error is not None and "could not be stored: the disk of /the/home is full" in ran.error
    )
    failed = Cell(code="1/0", status="error", error="ZeroDivisionError\n")
    unrecorded(failed, OSError(errno.EIO, "Input/output error"))
    assert str(failed.error).startswith("ZeroDivisionError\n")
    assert "Input/output error" in str(failed.error)


def test_a_rescrub_frames_the_records_it_changes_again(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    secret = "s3cret-value-for-framing"
    path.write_bytes(json.dumps({"code": "legacy"}).encode() + b"\n")
    written(path, [Cell(code=f"print({secret!r})", stdout=secret), Cell(code="plain")])
    scrub = Scrubber()
    scrub.add(secret, "DS_X__TOKEN")
    assert rescrub_history(CellHistory(path, LIMIT), scrub)
    loaded = CellHistory(path, LIMIT).load()
    assert [cell.code for cell in loaded] == ["legacy", "print('[DS_X__TOKEN]')", "plain"]
    assert secret not in path.read_text()


def test_cells_keep_their_numbers_and_old_records_are_numbered_by_position(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.jsonl"
    note = Cell(code="", description="history folded", stdout="30 earlier cell(s) were folded\n")
    old = [{k: v for k, v in c.to_dict().items() if k != "number"} for c in [note, *cells(2)]]
    path.write_text("".join(json.dumps(record) + "\n" for record in old))  # before numbers
    numbered = Cell(code="later", number=40)
    written(path, [numbered, Cell(code="next", number=41)])
    loaded = CellHistory(path, LIMIT).load()
    assert [cell.number for cell in loaded] == [0, 31, 32, 40, 41]
