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


RESCRUBBER = Path(__file__).with_name("rescrub_process.py")
SECRET = "stress-secret-0123456789"


def test_a_rescrub_beside_a_writer_keeps_the_store_whole(tmp_path: Path) -> None:
    """One process writes observations holding a secret (its store closed and opened again
    every 20 puts, as short-lived processes come and go); another keeps a store open, as a
    server does, and re-scrubs the home again and again. Neither ever finds the database
    malformed, and it checks whole afterwards."""
    path = tmp_path / "observations.db"
    ObservationStore(path, settings=Settings(home=tmp_path)).close()
    written = tmp_path / "written.txt"
    with written.open("w") as out:
        writer = subprocess.Popen(
            [sys.executable, str(WRITER), str(path), "a", SECRET, "70000", "20"],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        deadline = time.monotonic() + 60
        while written.stat().st_size < 1000 and writer.poll() is None:  # under way
            assert time.monotonic() < deadline, "the writer did not get going"
            time.sleep(0.05)
        rescrubber = subprocess.run(
            [sys.executable, str(RESCRUBBER), str(path), SECRET, "5"],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert writer.poll() is None, f"the writer failed: {writer.communicate()[1]}"
    finally:
        writer.kill()
        _, writer_errors = writer.communicate()
    assert rescrubber.returncode == 0, rescrubber.stderr
    passes = [line.split() for line in rescrubber.stdout.splitlines()]
    assert len(passes) == 5 and all(p[3] == "0" for p in passes), rescrubber.stderr
    assert any(int(p[2]) > 0 for p in passes)  # entries were rewritten
    assert "Traceback" not in writer_errors, writer_errors
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_second_store_in_a_process_keeps_the_first_ones_locks(tmp_path: Path) -> None:
    """Opening a store again must not open and close the database file outside SQLite: that
    drops the process's locks, and another process closing its last connection would then
    delete the WAL the first store is still using."""
    path = tmp_path / "o.db"
    settings = Settings(home=tmp_path)
    with ObservationStore(path, settings=settings) as first:
        first.put("kept", turn_id="t")
        ObservationStore(path, settings=settings).close()  # e.g. a re-scrub's own
        other = (
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "c.execute('SELECT 1 FROM entries'); c.close()"
        )
        subprocess.run([sys.executable, "-c", other, str(path)], check=True, timeout=60)
        assert path.with_name("o.db-wal").exists()  # the other process was not the last
        assert [i.turn_id for i in first.list_all()] == ["t"]
