"""Several threads and processes on one store; a writer killed mid-write loses nothing."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.observations import ObservationStore

WRITER = Path(__file__).with_name("writer_process.py")


def test_threads_share_a_store(tmp_path: Path) -> None:
    store = ObservationStore(tmp_path / "o.db", settings=Settings(home=tmp_path))
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for number in range(30):
                text = f"worker {worker} item {number} " * 300
                entry = store.put(text, turn_id=f"w{worker}", step_num=number)
                assert store.read(entry, "full").content == text
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert all(len(store.list_for_turn(f"w{i}")) == 30 for i in range(6))
    store.close()


def start_writer(path: Path, label: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(path), label], stdout=subprocess.PIPE, text=True
    )


def committed_ids(writer: subprocess.Popen[str]) -> list[tuple[str, int]]:
    assert writer.stdout is not None
    rows = []
    for line in writer.stdout.read().splitlines():
        parts = line.split()
        if len(parts) == 2:  # a line cut by the kill is not a promise
            rows.append((parts[0], int(parts[1])))
    return rows


def test_processes_write_at_once_and_a_killed_writer_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    ObservationStore(path, settings=Settings(home=tmp_path)).close()  # schema first
    writers = [start_writer(path, label) for label in ("a", "b")]
    time.sleep(1.5)
    for writer in writers:
        writer.send_signal(signal.SIGKILL)  # mid-write, most likely
        writer.wait()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store = ObservationStore(path, settings=Settings(home=tmp_path))
    for label, writer in zip(("a", "b"), writers, strict=True):
        rows = committed_ids(writer)
        assert len(rows) > 3, "the writer did not get going"
        for entry, number in rows:
            content = store.get(entry).content
            assert isinstance(content, str) and content.startswith(f"{label} {number} ")
    store.close()
