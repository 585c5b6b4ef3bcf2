"""Killing a writer at any moment leaves active.yaml old or new, never cut; and the lock.

The writers are real processes (``state_writer.py``) killed with SIGKILL at random moments,
again and again; after each kill the file must load and be the last state the writer
reported or the one it was writing.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scratchpad.errors import AgentLockedError
from scratchpad.memory import AgentConfig, CycleAgent, ScriptedModel, ToolsConfig, load_state
from scratchpad.memory.layout import AgentPaths
from scratchpad.memory.lock import agent_lock, is_locked
from scratchpad.memory.state import parse_state
from tests.memory.helpers import make_agent, reply
from tests.memory.state_writer import notes_for

WRITER = Path(__file__).with_name("state_writer.py")


def start_writer(mode: str, root: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), mode, str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def kill_at_random(writer: subprocess.Popen[str], rng: random.Random) -> list[int]:
    """Wait for the first reported write, kill at a random moment, return what was reported."""
    assert writer.stdout is not None
    first = writer.stdout.readline()
    assert first.strip().isdigit(), "the writer died before its first write"
    time.sleep(rng.uniform(0.0, 0.12))
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=10)
    rest = writer.stdout.read().splitlines()
    writer.stdout.close()
    return [int(line) for line in [first, *rest] if line.strip().isdigit()]


def check_old_or_new(paths: AgentPaths, reported: list[int]) -> int:
    state = load_state(paths.active)  # parses and validates: never truncated
    counter = state["counter"]
    assert counter in (reported[-1], reported[-1] + 1)  # last reported, or the one in flight
    assert state["notes"].startswith(notes_for(counter))
    return int(counter)


@pytest.mark.parametrize("mode", ["save", "cycle"])
def test_a_writer_killed_again_and_again_leaves_old_or_new(tmp_path: Path, mode: str) -> None:
    paths = AgentPaths.of(tmp_path / "agent")
    rng = random.Random(6)
    seen: set[int] = set()
    for _ in range(12):
        reported = kill_at_random(start_writer(mode, paths.root), rng)
        seen.add(check_old_or_new(paths, reported))
    assert len(seen) == 12  # every round made progress past the previous kill
    # a cycle after all that: the dead writers' locks do not block, their temp files go
    agent, _ = make_agent(paths.root, [reply("done")])
    cycle = agent.run_once()
    assert not list(paths.scratch.glob(".*.tmp"))
    assert load_state(paths.before(cycle))["counter"] == max(seen)


def stopped(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] in ("T", "t")


def kill_mid_write(writer: subprocess.Popen[str], paths: AgentPaths, rng: random.Random) -> int:
    """Freeze the writer (SIGSTOP) until it is caught inside a write of active.yaml (its temp
    file exists), kill it there, and return the last write it reported."""
    assert writer.stdout is not None
    reported = int(writer.stdout.readline())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        writer.send_signal(signal.SIGSTOP)
        while not stopped(writer.pid):
            time.sleep(0.0005)
        if list(paths.scratch.glob(".active.yaml.*.tmp")):
            break
        writer.send_signal(signal.SIGCONT)
        time.sleep(rng.uniform(0.0, 0.004))
    else:
        pytest.fail("the writer was never caught inside a write")
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=10)
    for line in writer.stdout.read().splitlines():
        reported = int(line) if line.strip().isdigit() else reported
    writer.stdout.close()
    return reported


@pytest.mark.parametrize("mode", ["save", "cycle"])
def test_a_writer_killed_inside_a_write_leaves_the_old_file(tmp_path: Path, mode: str) -> None:
    paths = AgentPaths.of(tmp_path / "agent")
    rng = random.Random(8)
    for _ in range(5):
        writer = start_writer(mode, paths.root)
        reported = kill_mid_write(writer, paths, rng)
        state = load_state(paths.active)
        assert state["counter"] == reported  # exactly the old state: the new one never landed
        assert state["notes"].startswith(notes_for(reported))
        for leftover in paths.scratch.glob(".*.tmp"):
            leftover.unlink()  # a cycle would clear them; the save loop does not


def test_snapshots_of_killed_cycles_are_whole(tmp_path: Path) -> None:
    paths = AgentPaths.of(tmp_path / "agent")
    rng = random.Random(7)
    for _ in range(5):
        kill_at_random(start_writer("cycle", paths.root), rng)
    snapshots = list(paths.scratch.glob("2*.yaml"))
    assert snapshots
    for snapshot in snapshots:
        parse_state(snapshot.read_text(), snapshot)  # every file there is complete


# -- the lock --------------------------------------------------------------------------------
def test_a_second_cycle_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    paths = AgentPaths.of(tmp_path / "agent")
    agent, model = make_agent(paths.root, [reply("done")])
    with agent_lock(paths.lock):  # another cycle holds the directory
        before = sorted(p.name for p in paths.root.rglob("*"))
        with pytest.raises(AgentLockedError, match=r"is busy.*nothing was written"):
            agent.run()
        assert sorted(p.name for p in paths.root.rglob("*")) == before == [".lock"]
        assert is_locked(paths.lock)
    assert model.prompts == []
    assert agent.run().outcome == "done"  # free again
    assert not is_locked(paths.lock)


def test_a_cycle_in_another_process_blocks_this_one(tmp_path: Path) -> None:
    paths = AgentPaths.of(tmp_path / "agent")
    paths.root.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path\n"
            "from scratchpad.memory.lock import agent_lock\n"
            "with agent_lock(Path(sys.argv[1])):\n"
            "    print('held', flush=True); time.sleep(60)\n",
            str(paths.lock),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        agent, _ = make_agent(paths.root, [reply("done")])
        with pytest.raises(AgentLockedError, match=f"process {holder.pid} holds"):
            agent.run()
        assert not paths.scratch.exists() and not paths.logs.exists()
    finally:
        holder.kill()
        holder.wait()
    assert agent.run().outcome == "done"  # the dead holder's lock is gone with it


def test_a_stale_lock_file_does_not_block(tmp_path: Path) -> None:
    paths = AgentPaths.of(tmp_path / "agent")
    paths.root.mkdir()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    ).stdout.strip()
    paths.lock.write_text(f"{dead}\n")  # left by a process that was killed
    assert not is_locked(paths.lock)
    model = ScriptedModel([reply("done")])
    config = AgentConfig(tools=ToolsConfig(pads=False))
    assert CycleAgent(paths.root, model, config=config, rules="r").run().outcome == "done"
