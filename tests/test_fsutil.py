"""Atomic writes: the bytes, the mode of the file, nothing left behind."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from scratchpad.fsutil import (
    atomic_write_bytes,
    atomic_write_chunks,
    atomic_write_text,
    create_exclusive,
    current_umask,
)


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    yield
    os.umask(old)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_mode_open_would_give_it(tmp_path: Path, umask_027: None) -> None:
    path = tmp_path / "new.yaml"
    atomic_write_text(path, "a: 1\n")
    assert path.read_text() == "a: 1\n"
    assert mode_of(path) == 0o640  # 0o666 less the umask, not mkstemp's 0o600
    assert current_umask() == 0o027


def test_a_rewritten_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "RULES.md"
    path.write_text("old")
    for mode in (0o644, 0o664, 0o600):
        path.chmod(mode)
        atomic_write_text(path, f"rules {mode:o}")
        assert mode_of(path) == mode and path.read_text() == f"rules {mode:o}"


def test_an_explicit_mode_wins(tmp_path: Path) -> None:
    path = tmp_path / "api_key"
    path.write_text("old")
    path.chmod(0o644)
    atomic_write_text(path, "secret", mode=0o600)
    assert mode_of(path) == 0o600
    atomic_write_text(tmp_path / "fresh_key", "secret", mode=0o600)
    assert mode_of(tmp_path / "fresh_key") == 0o600


def test_bytes_are_written_as_they_are_and_no_temp_file_stays(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "copy.yaml"
    data = b"goals: [a]\r\n\xff\x00 not utf-8"
    atomic_write_bytes(path, data)
    assert path.read_bytes() == data
    atomic_write_text(path, "héllo\r\n")
    assert path.read_bytes() == "héllo\r\n".encode()
    assert [p.name for p in path.parent.iterdir()] == ["copy.yaml"]


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "state.yaml"
    atomic_write_text(path, "old")
    with pytest.raises(TypeError):
        atomic_write_bytes(path, "not bytes")  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.yaml"]


def test_create_exclusive_creates_once_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "key"
    assert create_exclusive(path, b"first\n")
    assert not create_exclusive(path, b"second\n")
    assert path.read_bytes() == b"first\n" and mode_of(path) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["key"]


def test_atomic_write_chunks_streams_and_keeps_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"old\n")
    os.chmod(path, 0o640)
    atomic_write_chunks(path, (f"line {i}\n".encode() for i in range(3)))
    assert path.read_bytes() == b"line 0\nline 1\nline 2\n"
    assert mode_of(path) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["lines.jsonl"]
