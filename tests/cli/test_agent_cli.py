"""``scratchpad agent``: through typer's runner, and as a real subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scratchpad.cli.app import app
from scratchpad.memory import load_state
from scratchpad.memory.layout import AgentPaths
from scratchpad.memory.lock import agent_lock
from tests.process_helpers import default_sigint
from tests.runtime.attacks import gone, processes_with

runner = CliRunner()
SCRATCHPAD = Path(sys.executable).with_name("scratchpad")


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # rich tables are not cut


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def script(tmp_path: Path, *replies: object, name: str = "replies.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(list(replies)))
    return f"scripted:{path}"


def call(tool: str, **args: object) -> dict[str, object]:
    return {"tool": tool, "args": args}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    code, _, err = invoke("agent", "init", str(agent))
    assert code == 0, err
    (agent / "config.yaml").write_text("tools:\n  pads: false\n")
    return agent


def test_init_lays_out_the_directory(tmp_path: Path) -> None:
    agent = tmp_path / "new-agent"
    code, out, _ = invoke("agent", "init", str(agent))
    assert code == 0
    for name in ("RULES.md", "config.yaml", "scratchpad/active.yaml"):
        assert f"created {name}" in out
    assert (agent / "logs").is_dir()
    assert "# Rules" in (agent / "RULES.md").read_text()
    assert "already an agent directory" in invoke("agent", "init", str(agent))[1]


@pytest.mark.parametrize("name", ["x[/y]", "a[red]b", "[bold]c"])
def test_paths_are_printed_as_they_are(tmp_path: Path, name: str) -> None:
    agent = tmp_path / name
    code, out, err = invoke("agent", "init", str(agent))
    assert code == 0, err
    assert f"edit {agent.resolve() / 'RULES.md'} and" in out
    assert f"scratchpad agent run {agent}" in out
    code, out, err = invoke("agent", "init", str(agent))
    assert code == 0, err
    assert f"{agent.resolve()} is already an agent directory" in out


def test_run_status_diff_and_history(root: Path, tmp_path: Path) -> None:
    model = script(
        tmp_path,
        call("update_scratchpad", goals=["launch"], current_task="write", pending_actions=["test"]),
        call("echo", text="checked"),
        call("done", summary="wrote it"),
    )
    code, out, err = invoke("agent", "run", str(root), "--model", model)
    assert code == 0, err
    assert "done after 3 step(s): wrote it" in out
    code, out, _ = invoke("agent", "status", str(root))
    assert code == 0
    for text in ("launch", "current task", "test", "1 task(s)", "done after 3 step(s)", "wrote it"):
        assert text in out
    assert "[COMPLETED] wrote it" in out  # the end of the notes
    code, out, _ = invoke("agent", "diff", str(root))
    assert code == 0 and "changed: goals, current_task, completed_tasks, notes" in out
    assert "+- launch" in out and "+current_task: test" in out
    code, out, _ = invoke("agent", "history", str(root))
    assert code == 0 and "done" in out and "wrote it" in out and "before+after" in out


def test_several_cycles_every_interval(root: Path, tmp_path: Path) -> None:
    model = script(tmp_path, *[call("done", summary=f"cycle {n}") for n in range(3)])
    began = time.monotonic()
    code, out, err = invoke(
        "agent", "run", str(root), "--cycles", "3", "--every", "0.3", "--model", model
    )
    assert code == 0, err
    assert time.monotonic() - began >= 0.6  # two waits between three starts
    lines = out.splitlines()
    assert len(lines) == 3 and all("done after 1 step(s): cycle" in line for line in lines)
    assert len({line.split(":")[0] for line in lines}) == 3  # three cycle ids
    assert len(list((root / "scratchpad").glob("*_after.yaml"))) == 3


def test_a_failed_cycle_exits_1_and_points_at_the_log(root: Path, tmp_path: Path) -> None:
    code, out, err = invoke("agent", "run", str(root), "--model", script(tmp_path))
    assert code == 1
    assert "failed after 1 step(s)" in out
    assert "ran out of replies" in err and "traceback in" in err and "cycle_" in err
    code, out, _ = invoke("agent", "history", str(root))
    assert "failed" in out and "LLMError" in out


def test_max_iterations_is_reported(root: Path, tmp_path: Path) -> None:
    (root / "config.yaml").write_text("max_iterations: 2\ntools:\n  pads: false\n")
    model = script(tmp_path, "thinking...", "still thinking...")
    code, out, _ = invoke("agent", "run", str(root), "--model", model)
    assert code == 0 and "max_iterations after 2 step(s)" in out
    assert "max_iterations" in invoke("agent", "status", str(root))[1]


def test_the_model_can_come_from_config(root: Path, tmp_path: Path) -> None:
    model = script(tmp_path, call("done", summary="from config"))
    (root / "config.yaml").write_text(f"model: '{model}'\ntools:\n  pads: false\n")
    code, out, err = invoke("agent", "run", str(root))
    assert code == 0, err
    assert "from config" in out


def test_restore_and_reset(root: Path, tmp_path: Path) -> None:
    model = script(tmp_path, call("update_scratchpad", goals=["g1"]), call("done"))
    invoke("agent", "run", str(root), "--model", model)
    paths = AgentPaths.of(root)
    cycle = next(paths.scratch.glob("*_before.yaml")).name.removesuffix("_before.yaml")
    code, out, err = invoke("agent", "restore", str(root), cycle, "--before")
    assert code == 0, err
    assert load_state(paths.active)["goals"] == []
    assert "saved as prerestore_" in out and f"scratchpad agent restore {root} prerestore_" in out
    saved = next(paths.scratch.glob("prerestore_*.yaml")).stem
    assert invoke("agent", "restore", str(root), saved)[0] == 0
    assert load_state(paths.active)["goals"] == ["g1"]
    code, out, _ = invoke("agent", "reset", str(root))
    assert code == 0 and "removed active.yaml" in out
    assert not paths.active.exists() and paths.after(cycle).exists()
    assert "nothing to reset" in invoke("agent", "reset", str(root))[1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["agent", "run", "{missing}"], "is not an agent directory"),
        (["agent", "init", "{root}/RULES.md"], "is a file; give a directory"),
        (["agent", "status", "{missing}"], "scratchpad agent init"),
        (["agent", "diff", "{root}"], "no finished cycle"),
        (["agent", "diff", "{root}", "20200101_000000"], "no snapshot"),
        (["agent", "restore", "{root}", "nope"], "is not a cycle id"),
        (["agent", "run", "{root}", "--model", "nonsense"], "provider:model"),
    ],
)
def test_mistakes_get_a_clear_message_and_exit_2(
    root: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    filled = [a.format(root=root, missing=tmp_path / "missing") for a in args]
    code, _, err = invoke(*filled)
    assert code == 2
    assert message in " ".join(err.split())  # rich may wrap long lines


def test_bad_state_stops_the_run_and_is_left_alone(root: Path, tmp_path: Path) -> None:
    active = root / "scratchpad" / "active.yaml"
    active.write_text("pending_actions: 5\n")
    code, _, err = invoke("agent", "run", str(root), "--model", script(tmp_path, call("done")))
    assert code == 2 and "'pending_actions' must be a list" in " ".join(err.split())
    assert active.read_text() == "pending_actions: 5\n"
    code, _, err = invoke("agent", "status", str(root))
    assert code == 2 and "pending_actions" in err


def test_a_locked_agent_is_refused(root: Path, tmp_path: Path) -> None:
    with agent_lock(root / ".lock"):
        code, _, err = invoke("agent", "run", str(root), "--model", script(tmp_path, call("done")))
        assert code == 2 and "is busy" in err
        assert "a cycle is running" in invoke("agent", "status", str(root))[1]
    assert not list((root / "scratchpad").glob("*_before.yaml"))


def test_the_installed_command_runs_a_cycle(tmp_path: Path) -> None:
    assert SCRATCHPAD.exists()
    agent = tmp_path / "proc-agent"
    env = {**os.environ, "SCRATCHPAD_HOME": str(tmp_path / "proc-home"), "COLUMNS": "200"}

    def scratchpad(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(SCRATCHPAD), "agent", *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)

    assert scratchpad("init", str(agent)).returncode == 0
    (agent / "config.yaml").write_text("tools:\n  pads: false\n")
    model = script(tmp_path, call("echo", text="from a process"), call("done", summary="ok"))
    done = scratchpad("run", str(agent), "--model", model)
    assert done.returncode == 0, done.stderr
    assert "done after 2 step(s): ok" in done.stdout
    assert "from a process" in load_state(agent / "scratchpad" / "active.yaml")["notes"]
    history = scratchpad("history", str(agent))
    assert history.returncode == 0 and "done" in history.stdout


def test_ctrl_c_during_a_shell_call_stops_the_command(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    env = {**os.environ, "COLUMNS": "200"}
    assert invoke("agent", "init", str(agent))[0] == 0
    (agent / "config.yaml").write_text("tools:\n  pads: false\n  shell: true\n")
    sleep = f"30.{os.getpid()}"  # its token: the command runs in a PID namespace of its own
    command = f"sleep {sleep} & wait"
    model = script(tmp_path, call("shell", command=command), call("done"))
    run = [str(SCRATCHPAD), "agent", "run", str(agent), "--model", model]
    with subprocess.Popen(
        run,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_sigint,
    ) as proc:
        deadline = time.monotonic() + 30
        while not processes_with(f"sleep\0{sleep}"):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert b"interrupted" in err
    assert asyncio.run(gone(sleep)) == []  # the tool call was cancelled and stopped its command
    [log] = (agent / "logs").glob("cycle_*.log")
    assert "stopped by KeyboardInterrupt" in log.read_text()
