"""Workspace files: paths stay inside the workspace and out of the home, listings are sorted
and capped, uploads are atomic and size-limited, deletes take files and empty directories."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.errors import (
    FileTooLargeError,
    InvalidInputError,
    PadError,
    PadNotFoundError,
    WorkspaceConflictError,
    WorkspaceFileNotFoundError,
)
from scratchpad.runtime.files import MAX_PATH_CHARS, Workspace, clean_path, workspace
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.scrub import scrubber


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    (path / ".scratchpad" / "vault").mkdir(parents=True)
    (path / ".scratchpad" / "api_key").write_text("key")
    (path / "data").mkdir()
    (path / "data" / "b.csv").write_text("b")
    (path / "notes.txt").write_text("hello")
    return path


@pytest.fixture
def ws(root: Path) -> Workspace:
    return Workspace.of(root, hidden=[root / ".scratchpad"])


def read(ws: Workspace, path: str) -> bytes:
    fd, size = ws.open_file(path)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read()
    assert len(data) == size
    return data


def put(ws: Workspace, path: str, data: bytes, limit: int = 1 << 20) -> bool:
    upload = ws.upload(path, limit)
    upload.write(data)
    return upload.commit()


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/etc/passwd", "absolute"),
        ("../outside", "'..'"),
        ("data/../../x", "'..'"),
        ("a\x00b", "control"),
        ("a\nb", "control"),
        ("x" * (MAX_PATH_CHARS + 1), "at most"),
    ],
)
def test_bad_paths_are_refused_saying_why(ws: Workspace, path: str, says: str) -> None:
    for call in (ws.listing, lambda p: ws.open_file(p), ws.delete, lambda p: ws.upload(p, 10)):
        with pytest.raises(InvalidInputError, match=re.escape(says)):
            call(path)


def test_paths_are_normalised() -> None:
    assert clean_path("a//./b/") == "a/b"
    assert clean_path("") == clean_path(".") == ""


def test_listing_puts_directories_first_and_hides_the_home(ws: Workspace, root: Path) -> None:
    (root / "Zeta").mkdir()
    (root / "alpha.py").write_text("x = 1")
    listed = ws.listing("")
    assert [(e["name"], e["type"]) for e in listed["entries"]] == [
        ("data", "dir"),
        ("Zeta", "dir"),
        ("alpha.py", "file"),
        ("notes.txt", "file"),
    ]
    note = listed["entries"][-1]
    assert note == {
        "name": "notes.txt",
        "path": "notes.txt",
        "type": "file",
        "size": 5,
        "modified": note["modified"],
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", note["modified"])
    assert listed["truncated"] is False
    assert ws.listing("data")["entries"][0]["path"] == "data/b.csv"


def test_the_home_is_never_reached(ws: Workspace, root: Path) -> None:
    (root / "to-home").symlink_to(root / ".scratchpad")
    assert "to-home" not in [e["name"] for e in ws.listing("")["entries"]]
    for path in (".scratchpad", ".scratchpad/api_key", "to-home/api_key", "data/../.scratchpad"):
        with pytest.raises(InvalidInputError, match=r"Scratchpad home|'\.\.'"):
            ws.open_file(path)
    with pytest.raises(InvalidInputError, match="Scratchpad home"):
        ws.listing(".scratchpad/vault")
    with pytest.raises(InvalidInputError, match="Scratchpad home"):
        ws.upload(".scratchpad/api_key", 10)
    with pytest.raises(InvalidInputError, match="Scratchpad home"):
        ws.delete(".scratchpad/api_key")
    assert (root / ".scratchpad" / "api_key").read_text() == "key"


def test_symlinks_that_lead_out_are_refused(ws: Workspace, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (root / "out-dir").symlink_to(outside)
    (root / "out-file").symlink_to(outside / "secret.txt")
    (root / "in-file").symlink_to(root / "notes.txt")
    names = [e["name"] for e in ws.listing("")["entries"]]
    assert "out-dir" not in names and "out-file" not in names and "in-file" in names
    for path in ("out-file", "out-dir/secret.txt"):
        with pytest.raises(InvalidInputError, match="outside the workspace"):
            ws.open_file(path)
    with pytest.raises(InvalidInputError, match="outside the workspace"):
        ws.upload("out-dir/new.txt", 10)
    with pytest.raises(InvalidInputError, match="outside the workspace"):
        ws.listing("out-dir")
    assert not (outside / "new.txt").exists()
    assert read(ws, "in-file") == b"hello"


def test_a_descriptor_that_ends_up_outside_is_refused(ws: Workspace, tmp_path: Path) -> None:
    """What was opened is checked again: a directory swapped for a link meanwhile is caught."""
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        with pytest.raises(InvalidInputError, match="outside the workspace"):
            ws._check_fd(fd, "data")
    finally:
        os.close(fd)


def test_names_that_cannot_be_sent_back_are_left_out(ws: Workspace, root: Path) -> None:
    (root / "bad\nname").write_text("x")
    os.close(os.open(os.fsencode(root) + b"/caf\xe9", os.O_CREAT | os.O_WRONLY))
    scrubber().add("a-secret-value-42")
    (root / "a-secret-value-42.txt").write_text("x")
    assert [e["name"] for e in ws.listing("")["entries"]] == ["data", "notes.txt"]


def test_listings_are_capped(ws: Workspace, root: Path) -> None:
    for i in range(12):
        (root / "data" / f"f{i:02}").write_text("")
    listed = ws.listing("data", limit=5)
    assert listed["truncated"] is True
    assert [e["name"] for e in listed["entries"]] == ["b.csv", "f00", "f01", "f02", "f03"]


def test_listing_what_is_missing_or_a_file(ws: Workspace) -> None:
    with pytest.raises(WorkspaceFileNotFoundError):
        ws.listing("nowhere")
    with pytest.raises(WorkspaceConflictError, match="is a file"):
        ws.listing("notes.txt")


def test_reading_refuses_directories_missing_files_and_fifos(ws: Workspace, root: Path) -> None:
    with pytest.raises(WorkspaceFileNotFoundError):
        ws.open_file("missing.txt")
    with pytest.raises(WorkspaceConflictError, match="directory"):
        ws.open_file("data")
    with pytest.raises(WorkspaceConflictError, match="directory"):
        ws.open_file("")
    os.mkfifo(root / "pipe")
    done = threading.Event()

    def open_fifo() -> None:
        with pytest.raises(WorkspaceConflictError, match="not a regular file"):
            ws.open_file("pipe")
        done.set()

    threading.Thread(target=open_fifo, daemon=True).start()
    assert done.wait(10), "opening a FIFO hung"


def test_uploads_replace_atomically(ws: Workspace, root: Path) -> None:
    assert put(ws, "new/deep/file.bin", b"\x00\xff") is True
    assert (root / "new" / "deep" / "file.bin").read_bytes() == b"\x00\xff"
    upload = ws.upload("notes.txt", 100)
    upload.write(b"new content")
    assert (root / "notes.txt").read_text() == "hello"  # nothing shows before the commit
    assert upload.commit() is False
    assert (root / "notes.txt").read_text() == "new content"
    aborted = ws.upload("notes.txt", 100)
    aborted.write(b"half")
    aborted.abort()
    assert (root / "notes.txt").read_text() == "new content"
    assert sorted(p.name for p in root.iterdir()) == [".scratchpad", "data", "new", "notes.txt"]


def test_uploads_over_the_limit_leave_nothing(ws: Workspace, root: Path) -> None:
    upload = ws.upload("big.bin", 10)
    upload.write(b"x" * 10)
    with pytest.raises(FileTooLargeError, match="SCRATCHPAD_MAX_UPLOAD_BYTES"):
        upload.write(b"y")
    upload.abort()
    assert not (root / "big.bin").exists()
    assert not [p for p in root.iterdir() if p.name.endswith(".tmp")]


def test_uploads_never_replace_a_directory(ws: Workspace, root: Path) -> None:
    with pytest.raises(WorkspaceConflictError, match="is a directory"):
        ws.upload("data", 10)
    with pytest.raises(WorkspaceConflictError, match="not a directory"):
        ws.upload("notes.txt/inside", 10)
    assert (root / "data" / "b.csv").read_text() == "b"


def test_delete_takes_files_links_and_empty_directories(ws: Workspace, root: Path) -> None:
    (root / "empty").mkdir()
    (root / "link").symlink_to(root / "notes.txt")
    assert ws.delete("link") == "link"
    assert (root / "notes.txt").exists() and not (root / "link").is_symlink()
    assert ws.delete("./notes.txt") == "notes.txt"
    assert ws.delete("empty") == "empty"
    assert not (root / "notes.txt").exists() and not (root / "empty").exists()
    with pytest.raises(WorkspaceConflictError, match="not empty"):
        ws.delete("data")
    with pytest.raises(WorkspaceFileNotFoundError):
        ws.delete("notes.txt")
    with pytest.raises(InvalidInputError, match="cannot be deleted"):
        ws.delete("")


def test_the_manager_gives_a_pads_workspace(tmp_path: Path, settings: Settings) -> None:
    manager = ScratchpadManager(workspace=tmp_path / "w", settings=settings)
    with pytest.raises(PadNotFoundError):
        manager.workspace_of("main")
    (manager.settings.home / "pads" / "main").mkdir(parents=True)
    assert manager.workspace_of("main") == (tmp_path / "w").resolve()
    files = workspace(manager, "main")
    assert files.hidden == (manager.settings.home.resolve(),)
    remote = settings.model_copy(
        update={"backend": "remote", "remote_url": "http://h:1", "remote_api_key": "k"}
    )
    with pytest.raises(PadError, match="http://h:1"):
        ScratchpadManager(settings=remote).workspace_of("main")


def test_parents_are_never_made_through_a_symbolic_link(
    ws: Workspace, root: Path, tmp_path: Path
) -> None:
    """A directory swapped for a link between the path check and the creation of parents
    (a cell racing an upload) makes the upload fail; nothing is created where it leads."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "swapped").symlink_to(outside)
    with pytest.raises(NotADirectoryError):
        ws._make_parents(Path("swapped/new"))
    assert list(outside.iterdir()) == []
    ws._make_parents(Path("plain/new"))
    assert (root / "plain" / "new").is_dir()
