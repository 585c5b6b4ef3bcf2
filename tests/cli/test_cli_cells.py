"""Detached cells on the command line: ``exec --detach`` returns at once with the cell's id,
``cells`` lists it running then ended, ``attach`` follows it to its result; Ctrl-C during
``attach`` leaves the cell running, ``attach --cancel`` makes it cancel the cell. Through
typer's runner (the background server of the test's home) and as real subprocesses against
a real ``scratchpad serve``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from scratchpad.cli.app import app
from tests.process_helpers import default_sigint
from tests.server_helpers import Relay, running_server

runner = CliRunner()
KEY = "cells-key"


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def gated(*gates: str) -> str:
    """A cell that prints 'started', waits for each of ``gates`` (default: 'go'), a file of
    its workspace, in turn, printing the name of each but the last once there; then prints
    'done' and answers 42."""
    waits = [f"wait({gate!r})" for gate in gates or ("go",)]
    return (
        "import pathlib, time\n"
        "def wait(gate):\n"
        "    deadline = time.monotonic() + 120\n"
        "    while not pathlib.Path(gate).exists() and time.monotonic() < deadline:\n"
        "        time.sleep(0.02)\n"
        "    return gate\n"
        "print('started', flush=True)\n"
        + "".join(f"print({wait}, flush=True)\n" for wait in waits[:-1])
        + f"{waits[-1]}\n"
        "print('done')\n"
        "6 * 7"
    )


def open_gate(run: Any, pad: str, tmp_path: Path, gate: str = "go") -> None:
    """Let a :func:`gated` cell of ``pad`` go on (its kernel sees its workspace only)."""
    local = tmp_path / gate
    local.write_text(gate)
    code, _, err = run("files", "put", pad, str(local), gate)
    assert code == 0, err


def listed(run: Any, pad: str) -> dict[str, dict[str, Any]]:
    """``cells PAD --json`` by id, through ``run`` (the runner or a subprocess)."""
    code, out, err = run("cells", pad, "--json")
    assert code == 0, err
    return {cell["id"]: cell for cell in json.loads(out)}


def wait_listed(run: Any, pad: str, cell_id: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        cell = listed(run, pad).get(cell_id)
        if cell is not None and cell["status"] == status:
            return cell
        assert time.monotonic() < deadline, f"cell {cell_id} is {cell}, never {status}"
        time.sleep(0.05)


def test_detach_returns_the_id_at_once_cells_lists_it_and_attach_follows_it(
    tmp_path: Path,
) -> None:
    code, out, err = invoke("exec", "p", "--detach", "--id", "job-1", "-d", "waits", gated())
    assert code == 0, err
    assert out == "job-1\n"  # the id alone on stdout, for scripts
    assert "follow it: scratchpad attach p job-1" in err
    running = wait_listed(invoke, "p", "job-1", "running")  # it runs with nobody attached
    assert running["number"] == 1 and running["description"] == "waits"
    assert isinstance(running["started_at"], float) and running["ended_at"] is None
    code, table, _ = invoke("cells", "p")
    assert code == 0
    row = next(line for line in table.splitlines() if "job-1" in line)
    assert "running" in row and "waits" in row and " s " in row  # its age: seconds so far
    open_gate(invoke, "p", tmp_path)
    code, out, err = invoke("attach", "p", "job-1")
    assert code == 0, err
    assert out.splitlines() == ["started", "done", "Out: 42"]
    assert "[ok] cell 1 · " in err
    ended = listed(invoke, "p")["job-1"]
    assert ended["status"] == "ok" and isinstance(ended["ended_at"], float)
    assert "ago" in next(line for line in invoke("cells", "p")[1].splitlines() if "job-1" in line)
    # an ended cell is printed at once, as exec prints it; --json gives the whole cell
    code, out, _ = invoke("attach", "p", "job-1")
    assert code == 0 and out.splitlines() == ["started", "done", "Out: 42"]
    code, out, _ = invoke("attach", "p", "job-1", "--json")
    assert code == 0 and json.loads(out)["result"] == "42"
    # the same id again is that cell: it does not run again
    code, out, err = invoke("exec", "p", "--detach", "--id", "job-1", "-d", "waits", gated())
    assert code == 0 and out == "job-1\n" and "ended already (ok)" in err
    assert [cell["number"] for cell in listed(invoke, "p").values()] == [1]


def test_attach_exits_as_exec_does_for_a_cell_that_failed() -> None:
    code, out, _ = invoke("exec", "p", "--detach", "--json", "--id", "bad", "1/0")
    assert code == 0 and json.loads(out)["id"] == "bad"
    code, _, err = invoke("attach", "p", "bad")
    assert code == 1 and "ZeroDivisionError" in err and "[error] cell 1 · " in err
    assert listed(invoke, "p")["bad"]["status"] == "error"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["attach", "ghost", "some-id"], "no pad named 'ghost'"),
        (["attach", "p", "nope"], "pad 'p' has no cell 'nope'"),
        (["attach", "p", "a b"], "cell id 'a b' is not allowed"),
        (["cells", "ghost"], "no pad named 'ghost'"),
        (["cells", "p", "--status", "done"], "'done' is not one of running, queued, recent"),
        (["exec", "p", "--detach", "--save-images", "x", "1"], "run the cell without --detach"),
    ],
)
def test_a_bad_pad_or_id_is_a_clear_error(args: list[str], message: str) -> None:
    assert invoke("exec", "p", "kept = 1")[0] == 0
    code, _, err = invoke(*args)
    assert code == 2, err
    assert message in err, err
    assert "Traceback" not in err
    assert invoke("cells", "p")[0] == 0  # p is listed: its cells ended, its table shows them


# -- as subprocesses, against a real server --------------------------------------------------


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a CLI that uses a ``scratchpad serve`` of its own."""
    with running_server(tmp_path / "server-home", tmp_path, KEY) as (url, _):
        yield on_server(url)


def on_server(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "SCRATCHPAD_BACKEND": "remote",
        "SCRATCHPAD_REMOTE_URL": url,
        "SCRATCHPAD_REMOTE_API_KEY": KEY,
    }


def cli(env: dict[str, str]) -> Any:
    def run(*args: str) -> tuple[int, str, str]:
        command = [sys.executable, "-m", "scratchpad.cli", *args]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=90)
        return done.returncode, done.stdout, done.stderr

    return run


def attached(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """``attach`` as a process a test will Ctrl-C, once it printed the cell's first line."""
    process = subprocess.Popen(
        [sys.executable, "-m", "scratchpad.cli", "attach", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,  # CI starts tests with SIGINT ignored
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "started\n"
    assert process.poll() is None
    return process


def test_ctrl_c_during_attach_detaches_and_the_cell_runs_on(
    env: dict[str, str], tmp_path: Path
) -> None:
    run = cli(env)
    code, out, err = run("exec", "p", "--detach", gated())
    assert code == 0, err
    cell_id = out.strip()
    assert listed(run, "p")[cell_id]["status"] in ("queued", "running")  # it did not wait
    following = attached(env, "p", cell_id)
    following.send_signal(signal.SIGINT)
    _, err = following.communicate(timeout=30)
    assert following.returncode == 130, err
    assert f"detached from cell {cell_id} of p; it keeps running" in err
    assert f"scratchpad attach p {cell_id}" in err and "Traceback" not in err
    assert listed(run, "p")[cell_id]["status"] == "running"  # Ctrl-C left it alone
    open_gate(run, "p", tmp_path)
    code, out, err = run("attach", "p", cell_id)
    assert code == 0, err
    assert out.splitlines() == ["started", "done", "Out: 42"] and "[ok] cell 1 · " in err


def test_attach_cancel_makes_ctrl_c_cancel_the_cell(env: dict[str, str]) -> None:
    run = cli(env)
    code, out, err = run("exec", "p", "--detach", "--id", "doomed", gated("never"))
    assert code == 0 and out == "doomed\n", err
    following = attached(env, "p", "doomed", "--cancel")
    following.send_signal(signal.SIGINT)
    _, err = following.communicate(timeout=30)
    assert following.returncode == 1, err
    assert "cancelling the cell" in err and "[cancelled] cell 1 · " in err
    assert listed(run, "p")["doomed"]["status"] == "cancelled"
    code, out, _ = run("exec", "p", "'still' + ' here'")
    assert code == 0 and "Out: 'still here'" in out  # the pad goes on


def test_attach_follows_the_cell_again_after_a_dropped_connection(
    env: dict[str, str], tmp_path: Path
) -> None:
    run = cli(env)
    assert run("exec", "p", "--detach", "--id", "cut", gated("one", "two"))[0] == 0
    relay = Relay(int(env["SCRATCHPAD_REMOTE_URL"].rsplit(":", 1)[1]))
    try:
        following = attached(on_server(relay.url), "p", "cut")
        assert following.stdout is not None
        relay.cut()  # the network fails while it follows the cell
        open_gate(run, "p", tmp_path, "one")
        assert following.stdout.readline() == "one\n"
        relay.cut()
        open_gate(run, "p", tmp_path, "two")
        out, err = following.communicate(timeout=60)
    finally:
        relay.close()
    assert following.returncode == 0, err
    assert out.splitlines() == ["done", "Out: 42"]  # nothing missed, nothing twice
    assert "Traceback" not in err
