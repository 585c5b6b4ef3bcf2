"""The cell model and its capped output buffer."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scratchpad.runtime.cell import CappedOutput, Cell, encoded_size, fit_cell


def test_cell_round_trips_through_json_dict() -> None:
    cell = Cell(code="1", result="1", outputs=[{"text/plain": "1"}], status="error", error="E")
    assert Cell.from_dict(cell.to_dict()) == cell
    assert Cell.from_dict({**cell.to_dict(), "future_field": 1}) == cell


def test_unknown_status_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown cell status"):
        Cell.from_dict({"code": "1", "status": "weird"})


def test_small_output_is_kept_whole() -> None:
    buffer = CappedOutput(1024)
    assert buffer.append(b"hello ") == "hello "
    assert buffer.append("wörld".encode()) == "wörld"
    assert buffer.text() == "hello wörld"
    assert buffer.dropped == 0


def test_split_utf8_character_streams_intact() -> None:
    buffer = CappedOutput(1024)
    data = "é".encode()
    assert buffer.append(data[:1]) == ""
    assert buffer.append(data[1:]) == "é"


def test_oversized_output_keeps_head_and_tail() -> None:
    buffer = CappedOutput(1024)
    buffer.append(b"H" * 600)
    for _ in range(100):
        buffer.append(b"m" * 100)
    buffer.append(b"T" * 100)
    text = buffer.text()
    assert text.startswith("H" * 512)
    assert text.endswith("T" * 100)
    assert buffer.dropped == 600 + 10_000 + 100 - 1024
    assert f"[... {buffer.dropped} bytes of output dropped" in text


@given(st.lists(st.binary(max_size=300), max_size=30), st.integers(1024, 4096))
def test_capped_output_never_exceeds_cap_and_counts_everything(
    chunks: list[bytes], cap: int
) -> None:
    buffer = CappedOutput(cap)
    for chunk in chunks:
        buffer.append(chunk)
    total = sum(map(len, chunks))
    assert buffer.total == total
    kept = len(buffer.head) + min(len(buffer.tail), buffer.tail_cap)
    assert kept <= cap
    assert kept + buffer.dropped == total
    if total <= cap:
        assert buffer.text() == b"".join(chunks).decode("utf-8", "replace")


def test_a_fitted_cell_cuts_each_field_once_and_counts_every_character() -> None:
    cell = Cell("x", stdout="q" * (128 * 1024 + 2), stderr="z" * 30_000, logs="j" * 20_000)
    fitted = fit_cell(cell.to_dict(), 60 * 1024, lambda field: f"(whole: {field})")
    assert encoded_size(fitted) <= 60 * 1024
    for field, whole in (("stdout", cell.stdout), ("stderr", cell.stderr), ("logs", cell.logs)):
        note = rf"\[\.\.\. (\d+) characters cut \(whole: {field}\) \.\.\.\]"
        notes = re.findall(note, fitted[field])
        assert len(notes) <= 1
        cut = int(notes[0]) if notes else 0
        assert fitted[field].count(whole[0]) + cut == len(whole)


def test_a_fitted_cell_shares_its_room_among_its_long_fields() -> None:
    cell = Cell("x", stdout="q" * 131_074, stderr="z" * 200_001, result="r" * 100_000)
    fitted = fit_cell(cell.to_dict(), 60 * 1024, "(cut)")
    assert encoded_size(fitted) <= 60 * 1024
    whole = cell.to_dict()
    kept = {field: fitted[field].count(whole[field][0]) for field in ("stdout", "stderr", "result")}
    assert min(kept.values()) > 15_000, kept  # each keeps a head and tail, none starves


def test_a_fitted_cell_counts_what_an_earlier_cut_took_too() -> None:
    recorded = "c" * 50_000 + "\n[... 200002 characters omitted ...]\n" + "c" * 50_000
    fitted = fit_cell(Cell("x", result=recorded).to_dict(), 60 * 1024, "(cut)")
    notes = re.findall(r"\[\.\.\. (\d+) characters (?:omitted|cut)", fitted["result"])
    assert len(notes) == 1  # one note: the earlier one went with the middle
    kept = sum(map(len, re.findall("c{100,}", fitted["result"])))
    assert kept + int(notes[0]) == 300_002
