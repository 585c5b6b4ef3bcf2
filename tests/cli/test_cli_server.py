"""The CLI on top of the pad server, as real subprocesses: a background server started on
demand, variables kept between commands, streamed output, Ctrl-C and ``cancel``,
``server status|stop``, and a remote server named by settings."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scratchpad.cli.background import stop
from scratchpad.config import Settings
from scratchpad.runtime.proctree import descendants
from scratchpad.server.state import ServerRecord, read_record, state_path, write_record
from tests.process_helpers import default_sigint, process_gone
from tests.server_helpers import running_server

LONG_CELL = "import time\nx = 7\nprint('started', flush=True)\ntime.sleep(60)"


def scratchpad(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "scratchpad.cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=90)


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "scratchpad.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,  # it may be sent a Ctrl-C
    )


def wait_for_line(process: subprocess.Popen[str], expected: str) -> None:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.strip() == expected
    assert process.poll() is None  # streamed while the cell still runs


def assert_private(home: Path) -> None:
    """The home is 0700; every state file in it 0600 (a pad's venv is not state)."""
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    state = [p for p in home.iterdir() if p.is_file()] + list(home.glob("pads/*/history.jsonl"))
    names = {p.name for p in state}
    assert {"api_key", "server.json", "server.log", "observations.db", "history.jsonl"} <= names
    modes = {str(p.relative_to(home)): stat.S_IMODE(p.stat().st_mode) for p in state}
    assert modes == dict.fromkeys(modes, 0o600)


def test_two_exec_calls_share_variables_through_a_background_server(hermetic_env: Path) -> None:
    old_umask = os.umask(0o022)  # the server's files must be private whatever the umask
    try:
        first = scratchpad("exec", "p", "x = 1")
    finally:
        os.umask(old_umask)
    assert first.returncode == 0, first.stderr
    second = scratchpad("exec", "p", "print(x)")
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[0] == "1"
    record = read_record(Settings(home=hermetic_env))
    assert record is not None
    address = f"{record.host}:{record.port}"
    assert f"started a pad server for {hermetic_env} on {address}" in first.stderr
    assert "started a pad server" not in second.stderr  # it was running: nothing to say
    assert_private(hermetic_env)
    status = scratchpad("server", "status")
    assert status.returncode == 0 and f"pid {record.pid}" in status.stdout
    # it names the home, the address and where the pads work (each in its own directory)
    assert f"for {hermetic_env} on {address}" in status.stdout
    assert f"pads work in {hermetic_env / 'workspaces' / '<pad>'}" in status.stdout
    kernels = [  # the pad's processes (its kernel, and what starts it) below the server
        pid
        for pid in descendants(record.pid)
        if b"worker.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert kernels
    stopped = scratchpad("server", "stop")
    assert stopped.returncode == 0 and "stopped the server" in stopped.stdout
    assert process_gone(record.pid) and all(process_gone(pid) for pid in kernels)
    assert not state_path(Settings(home=hermetic_env)).exists()
    gone = scratchpad("server", "status")
    assert gone.returncode == 1 and "no server runs" in gone.stdout
    assert "no server runs" in scratchpad("server", "stop").stdout


def test_output_streams_and_ctrl_c_cancels_the_cell_keeping_state() -> None:
    running = start("exec", "p", LONG_CELL)
    wait_for_line(running, "started")
    running.send_signal(signal.SIGINT)
    _, err = running.communicate(timeout=30)
    assert running.returncode == 1
    assert "cancelling the cell" in err and "[cancelled]" in err
    after = scratchpad("exec", "p", "x * 6")
    assert "Out: 42" in after.stdout, after.stderr


def test_cancel_command_stops_a_cell_run_by_another_command() -> None:
    running = start("exec", "p", LONG_CELL)
    wait_for_line(running, "started")
    cancelled = scratchpad("cancel", "p")
    assert cancelled.returncode == 0, cancelled.stderr
    _, err = running.communicate(timeout=30)
    assert running.returncode == 1 and "[cancelled]" in err


def test_a_stale_record_is_replaced_and_a_second_server_per_home_is_refused(
    hermetic_env: Path,
) -> None:
    settings = Settings(home=hermetic_env)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    write_record(settings, ServerRecord(pid=dead.pid, host="127.0.0.1", port=1))
    assert scratchpad("exec", "p", "1").returncode == 0
    record = read_record(settings)
    assert record is not None and record.pid != dead.pid
    second = scratchpad("serve", "--port", "1")
    assert second.returncode == 2
    assert f"already runs at {record.url} (pid {record.pid})" in second.stderr


def test_pad_commands_use_the_remote_server_named_by_settings(
    tmp_path: Path, hermetic_env: Path
) -> None:
    with running_server(tmp_path / "server-home", tmp_path, "remote-key") as (url, _):
        env = {
            **os.environ,
            "SCRATCHPAD_BACKEND": "remote",
            "SCRATCHPAD_REMOTE_URL": url,
            "SCRATCHPAD_REMOTE_API_KEY": "remote-key",
        }
        assert scratchpad("exec", "far", "y = 5", env=env).returncode == 0
        listed = scratchpad("ls", env=env)
        assert listed.stdout.split()[:2] == ["far", "idle"]
        assert "y = 5" in scratchpad("view", "far", env=env).stdout
        wrong = scratchpad("ls", env={**env, "SCRATCHPAD_REMOTE_API_KEY": "nope"})
        assert wrong.returncode == 2 and "refused the key" in wrong.stderr
    assert read_record(Settings(home=hermetic_env)) is None  # no local server was started


@pytest.mark.parametrize("command", [["view", "x\x07y"], ["exec", "", "1"], ["view", "a\nb"]])
def test_bad_pad_names_are_refused_before_anything_runs(
    command: list[str], hermetic_env: Path
) -> None:
    done = scratchpad(*command)
    assert done.returncode == 2 and "pad name" in done.stderr.lower()


def test_a_record_naming_a_live_unrelated_process_is_ignored(hermetic_env: Path) -> None:
    settings = Settings(home=hermetic_env)
    bystander = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "scratchpad"]
    )
    try:
        write_record(settings, ServerRecord(pid=bystander.pid, host="127.0.0.1", port=1))
        assert "no server runs" in scratchpad("server", "status").stdout
        assert "no server runs" in scratchpad("server", "stop").stdout
        assert scratchpad("exec", "p", "1").returncode == 0
        assert bystander.poll() is None  # never signalled
    finally:
        bystander.kill()
        bystander.wait()


def test_two_homes_starting_servers_at_once_both_get_their_own(tmp_path: Path) -> None:
    homes = [tmp_path / "one", tmp_path / "two"]
    runs = [
        start("exec", "p", "1 + 1", env={**os.environ, "SCRATCHPAD_HOME": str(home)})
        for home in homes
    ]
    try:
        outputs = [run.communicate(timeout=90) for run in runs]
        assert [run.returncode for run in runs] == [0, 0], outputs
        records = [read_record(Settings(home=home)) for home in homes]
        assert all(records) and len({r.port for r in records if r}) == 2
    finally:
        for home in homes:
            stop(Settings(home=home))


def test_stopping_the_server_while_a_cell_runs_ends_it_and_keeps_it(hermetic_env: Path) -> None:
    running = start("exec", "p", LONG_CELL)
    wait_for_line(running, "started")
    begun = time.monotonic()
    stopped = scratchpad("server", "stop")
    assert stopped.returncode == 0 and time.monotonic() - begun < 20
    _, err = running.communicate(timeout=30)
    assert running.returncode == 1 and "[killed]" in err
    shown = scratchpad("view", "p")  # a new background server reads the pad's history
    assert "time.sleep(60)" in shown.stdout and "(killed" in shown.stdout
    assert "Cell stopped: the server stopped while it ran" in shown.stdout


def test_an_oversized_stream_shows_head_note_and_tail_as_the_cell_keeps_them() -> None:
    done = scratchpad("exec", "big", "print('a' * 10_000_000)")
    assert done.returncode == 0, done.stderr
    half = 4 * 1024 * 1024  # the default cap is 8 MiB per stream: 4 MiB head, 4 MiB tail
    head, dropped, tail = cut_at_note(done.stdout)
    # at the cut, a few characters that could begin or end a secret (one starting with "a")
    # may go too: the note counts them
    assert set(head) == {"a"} and half - 12 <= len(head) <= half
    assert set(tail) == {"a", "\n"} and tail.endswith("a\n") and half - 12 <= len(tail) <= half
    assert len(head) + dropped + len(tail) == 10_000_001
    assert "[ok]" in done.stderr


def cut_at_note(text: str) -> tuple[str, int, str]:
    """The head, the number of bytes the note says were dropped, and the tail of a cut text."""
    head, _, rest = text.partition("\n[... ")
    count, _, tail = rest.partition(
        " bytes of output dropped (kept the first and last part) ...]\n"
    )
    assert tail, text[-500:]
    return head, int(count), tail


def test_the_part_of_a_stream_past_the_streamed_head_is_shown_once() -> None:
    env = {**os.environ, "SCRATCHPAD_OUTPUT_CAP_BYTES": "65536"}  # the background server's cap
    code = (
        "import sys\n"
        "print('once')\n"
        "print('b' * 50_000)\n"  # past the 32 KiB head, within the cap: nothing dropped
        "_ = sys.stderr.write('c' * 200_000 + '\\n')\n"  # past the cap: the middle is dropped
    )
    assert scratchpad("server", "start", env=env).returncode == 0  # its notice is not the cell's
    done = scratchpad("exec", "p", code, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "once\n" + "b" * 50_000 + "\n"
    head, note, tail = done.stderr.partition(
        " bytes of output dropped (kept the first and last part) ...]\n"
    )
    assert note, done.stderr[-500:]
    kept, _, _ = head.partition("\n[... ")  # up to 12 "c"s may go at the cut (see above)
    assert set(kept) == {"c"} and 32768 - 12 <= len(kept) <= 32768
    line, _, after = tail.partition("\n")
    assert set(line) == {"c"} and 32767 - 12 <= len(line) <= 32767 and "[ok]" in after


def test_a_reader_that_goes_away_ends_exec_quietly() -> None:
    running = start("exec", "p", "x = 3\nfor i in range(10**6):\n    print(i)")
    assert running.stdout is not None and running.stderr is not None
    assert running.stdout.readline() == "0\n"
    running.stdout.close()  # like `| head -1`
    assert running.wait(timeout=60) == 1
    err = running.stderr.read()
    assert "Traceback" not in err and "error occurred" not in err, err
    after = scratchpad("exec", "p", "x * 14")
    assert "Out: 42" in after.stdout, after.stderr


def test_ctrl_c_cancels_this_commands_cell_never_another_clients() -> None:
    first = start("exec", "p", LONG_CELL)
    wait_for_line(first, "started")
    queued = start("exec", "p", "print('should not run')")
    deadline = time.monotonic() + 30
    while not _queued_on_server("p"):
        assert time.monotonic() < deadline, "the second cell never reached the server"
        time.sleep(0.05)
    queued.send_signal(signal.SIGINT)
    out, err = queued.communicate(timeout=30)
    assert "should not run" not in out
    assert "before it started; nothing ran" in err and "[cancelled]" in err
    assert first.poll() is None  # the other client's cell goes on
    assert scratchpad("cancel", "p").stdout.strip() == "cancelled the running cell of p"
    first.communicate(timeout=30)


def test_cancel_by_id_stops_that_cell_queued_or_running() -> None:
    first = start("exec", "p", "--id", "long-one", LONG_CELL)
    wait_for_line(first, "started")
    queued = start("exec", "p", "--id", "second", "print('should not run')")
    deadline = time.monotonic() + 30
    while not _queued_on_server("p"):
        assert time.monotonic() < deadline, "the second cell never reached the server"
        time.sleep(0.05)
    cancelled = scratchpad("cancel", "p", "--id", "second")
    assert cancelled.stdout.strip() == "cancelled cell second of p"
    out, err = queued.communicate(timeout=30)
    assert "should not run" not in out and "[cancelled] cell 2 · " in err
    assert first.poll() is None  # the running cell goes on
    assert scratchpad("cancel", "p", "--id", "long-one").returncode == 0
    _, err = first.communicate(timeout=30)
    assert first.returncode == 1 and "[cancelled] cell 1 · " in err
    unknown = scratchpad("cancel", "p", "--id", "nope")
    assert unknown.returncode == 0 and "no cell nope was queued or running in p" in unknown.stdout
    bad = scratchpad("cancel", "p", "--id", "a b")
    assert bad.returncode == 2 and "cell id 'a b' is not allowed" in bad.stderr


def _queued_on_server(name: str) -> bool:
    listed = json.loads(scratchpad("ls", "--json").stdout or "[]")
    return any(pad["name"] == name and pad["queued"] for pad in listed)


def test_exec_timeout_is_a_hard_limit() -> None:
    done = scratchpad("exec", "p", "--timeout", "0.5", "import time\ntime.sleep(30)")
    assert done.returncode == 1
    assert "Cell timed out after 0.5s (interrupted; variables are kept)" in done.stderr
    assert "[timeout]" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["reset", "ghost"], "no pad named 'ghost'"),
        (["cancel", "ghost"], "no pad named 'ghost'"),
        (["rm", "ghost"], "no pad named 'ghost'"),
        (["rm", ""], "invalid pad name ''"),
    ],
)
def test_commands_on_a_pad_that_does_not_exist_say_so(args: list[str], message: str) -> None:
    assert scratchpad("exec", "main", "kept = 1").returncode == 0
    done = scratchpad(*args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Out: 1" in scratchpad("exec", "main", "kept").stdout  # main was not touched
    assert "ghost" not in scratchpad("ls").stdout  # nothing was created
