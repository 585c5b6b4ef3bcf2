"""The home directory is 0700 and every state file in it 0600, even under a permissive umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from scratchpad.agent.persistence import SessionFiles
from scratchpad.config import Settings
from scratchpad.fsutil import open_private_append, private_dir, touch_private
from scratchpad.llm.messages import Message
from scratchpad.observations import ObservationStore
from scratchpad.runtime import venv
from scratchpad.server.auth import resolve_api_key
from scratchpad.server.state import ServerRecord, ServingLock, write_record


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "deep" / "home"  # missing parents too


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_private_dir_creates_every_missing_level_0700(tmp_path: Path) -> None:
    before = mode_of(tmp_path)
    path = private_dir(tmp_path / "a" / "b" / "c")
    for level in (tmp_path / "a", tmp_path / "a" / "b", path):
        assert mode_of(level) == 0o700, level
    assert mode_of(tmp_path) == before  # an existing parent is left alone
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    assert mode_of(private_dir(shared)) == 0o755  # existing: untouched unless asked
    assert mode_of(private_dir(shared, tighten=True)) == 0o700


def test_private_files_are_0600_and_old_ones_are_tightened(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "server.log"
    with open_private_append(log) as handle:
        handle.write(b"one\n")
    assert mode_of(log) == 0o600 and mode_of(log.parent) == 0o700
    log.chmod(0o644)  # written by an older version
    with open_private_append(log) as handle:
        handle.write(b"two\n")
    assert mode_of(log) == 0o600 and log.read_bytes() == b"one\ntwo\n"
    db = tmp_path / "x.db"
    touch_private(db)
    assert mode_of(db) == 0o600 and db.read_bytes() == b""


def test_observation_store_db_wal_and_shm_are_private(home: Path) -> None:
    with ObservationStore(settings=Settings(home=home)) as store:
        store.put("x" * 100_000, turn_id="t")
        files = {p.name: mode_of(p) for p in home.iterdir()}
        assert {"observations.db", "observations.db-wal", "observations.db-shm"} <= set(files)
        assert files == dict.fromkeys(files, 0o600)
    assert mode_of(home) == 0o700 and mode_of(home.parent) == 0o700


def test_session_history_and_episodic_log_are_private(home: Path) -> None:
    files = SessionFiles(home / "sessions", "s1", scrub=lambda text: text)
    files.log("tool_call", name="echo", input={"text": "hi"})
    files.save_history([Message.user("hello")])
    assert mode_of(files.log_path) == 0o600 and mode_of(files.history_path) == 0o600
    assert mode_of(home / "sessions") == 0o700 and mode_of(home) == 0o700


def test_server_record_lock_and_api_key_are_private(home: Path) -> None:
    settings = Settings(home=home)
    key = resolve_api_key(settings)
    assert mode_of(home) == 0o700 and mode_of(home / "api_key") == 0o600
    assert (home / "api_key").read_text() == key + "\n"
    write_record(settings, ServerRecord(pid=os.getpid(), host="127.0.0.1", port=1))
    lock = ServingLock(settings)
    assert lock.acquire()
    lock.release()
    files = {p.name: mode_of(p) for p in home.iterdir()}
    assert set(files) == {"api_key", "server.json", "server.serving.lock"}
    assert files == dict.fromkeys(files, 0o600)


async def test_a_rebuilt_venv_keeps_its_history_private(home: Path) -> None:
    root = home / "pads" / "p"
    await venv.create(root)
    assert mode_of(home) == 0o700 and mode_of(home / "pads") == 0o700
    history = root / "history.jsonl"
    with open_private_append(history) as handle:
        handle.write(b'{"code": "1"}\n')
    await venv.create(root)  # a rebuild rewrites the kept files
    assert history.read_bytes() == b'{"code": "1"}\n' and mode_of(history) == 0o600
