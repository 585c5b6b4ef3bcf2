"""Snapshots after the cycle: diff, history, restore (snapshot first), reset, retention order."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from scratchpad.errors import AgentError, AgentLockedError, AgentStateError
from scratchpad.memory import AgentConfig, ToolsConfig, agent_status, cycle_history, load_state
from scratchpad.memory.journal import CycleRecord, append_record, read_records
from scratchpad.memory.layout import AgentPaths
from scratchpad.memory.lock import agent_lock
from scratchpad.memory.snapshots import cycle_key, diff, prune, reset, restore
from tests.memory.helpers import fixed_clock, make_agent, reply

NOW = dt.datetime(2025, 6, 1, 12, 0, 0, tzinfo=dt.UTC)


@pytest.fixture
def two_cycles(tmp_path: Path) -> tuple[AgentPaths, list[str]]:
    """Cycle 1 sets a task and finishes it; cycle 2 runs out of steps after an echo."""
    config = AgentConfig(max_iterations=2, tools=ToolsConfig(pads=False))
    agent, _ = make_agent(
        tmp_path / "agent",
        [
            reply("update_scratchpad", current_task="t1", pending_actions=["t2"]),
            reply("done", summary="finished t1"),
            reply("echo", text="hello"),
            "not json",
        ],
        config=config,
        clock=fixed_clock(),
    )
    ids = [agent.run_once(), agent.run_once()]
    return agent.paths, ids


def test_diff_shows_what_the_last_cycle_changed(two_cycles: tuple[AgentPaths, list[str]]) -> None:
    paths, ids = two_cycles
    found = diff(paths)
    assert found.cycle_id == ids[1]
    assert found.changed_keys == ["notes"]
    assert f"--- {ids[1]}_before.yaml" in found.text and f"+++ {ids[1]}_after.yaml" in found.text
    assert '+  [TOOL] echo({"text": "hello"}) → hello' in found.text


def test_diff_of_a_named_cycle(two_cycles: tuple[AgentPaths, list[str]]) -> None:
    paths, ids = two_cycles
    found = diff(paths, ids[0])
    assert found.changed_keys == ["current_task", "completed_tasks", "notes"]  # t2 came and went
    assert "-current_task: null" in found.text and "+current_task: t2" in found.text


def test_diff_of_an_unknown_cycle_lists_the_known_ones(
    two_cycles: tuple[AgentPaths, list[str]],
) -> None:
    paths, ids = two_cycles
    with pytest.raises(AgentError, match=f"no snapshot 20990101_000000_before.yaml.*{ids[1]}"):
        diff(paths, "20990101_000000")
    with pytest.raises(AgentError, match="is not a cycle id"):
        diff(paths, "../../etc/passwd")


def test_diff_without_cycles(tmp_path: Path) -> None:
    (tmp_path / "agent").mkdir()
    with pytest.raises(AgentError, match="no finished cycle"):
        diff(AgentPaths.of(tmp_path / "agent"))


def test_history_has_every_outcome(tmp_path: Path) -> None:
    config = AgentConfig(max_iterations=1, tools=ToolsConfig(pads=False))
    agent, _ = make_agent(
        tmp_path, [reply("done", summary="ok"), "{}", RuntimeError("boom")], config=config
    )
    ids = [agent.run_once() for _ in range(3)]
    interrupted = "29990101_000000"  # a cycle that started (it has a log) and never finished
    agent.paths.cycle_log(interrupted).write_text("started\n")
    history = cycle_history(agent.paths)
    assert [(h.cycle_id, h.outcome) for h in history] == [
        (ids[0], "done"),
        (ids[1], "max_iterations"),
        (ids[2], "failed"),
        (interrupted, "interrupted"),
    ]
    assert history[0].detail == "ok" and history[2].detail == "RuntimeError: boom"
    assert history[0].snapshots == "before+after" and history[3].snapshots == "none"


def test_history_marks_the_running_cycle(tmp_path: Path) -> None:
    paths = AgentPaths.of(tmp_path)
    paths.logs.mkdir(parents=True)
    paths.cycle_log("20250101_000000").write_text("started\n")
    with agent_lock(paths.lock):
        assert cycle_history(paths)[-1].outcome == "running"
    assert cycle_history(paths)[-1].outcome == "interrupted"


def test_a_torn_record_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "cycles.jsonl"
    append_record(path, CycleRecord("20250101_000000", "done", 1, "a", "b"))
    with path.open("a") as handle:
        handle.write('{"cycle_id": "20250101_0000')  # a crash in the middle of a line
    assert [r.cycle_id for r in read_records(path)] == ["20250101_000000"]


def test_status_reports_the_state_and_the_last_cycle(
    two_cycles: tuple[AgentPaths, list[str]],
) -> None:
    paths, ids = two_cycles
    found = agent_status(paths)
    assert found.state["current_task"] == "t2" and found.cycles == 2
    assert found.last is not None and found.last.cycle_id == ids[1]
    assert found.last.outcome == "max_iterations" and not found.running


def test_restore_puts_back_a_snapshot_and_saves_the_current_first(
    two_cycles: tuple[AgentPaths, list[str]],
) -> None:
    paths, ids = two_cycles
    current = paths.active.read_bytes()
    saved = restore(paths, ids[0], "before", NOW)
    assert paths.active.read_bytes() == paths.before(ids[0]).read_bytes()
    assert saved is not None and saved.name == "prerestore_20250601_120000.yaml"
    assert saved.read_bytes() == current
    restore(paths, ids[0], "after", NOW)
    assert paths.active.read_bytes() == paths.after(ids[0]).read_bytes()
    second = paths.scratch / "prerestore_20250601_120000_2.yaml"  # same second: a suffix
    assert second.read_bytes() == paths.before(ids[0]).read_bytes()
    restore(paths, saved.stem, "after", NOW)  # undo by the saved name
    assert paths.active.read_bytes() == current


def test_restore_refuses_a_snapshot_that_would_not_load(
    two_cycles: tuple[AgentPaths, list[str]],
) -> None:
    paths, ids = two_cycles
    paths.after(ids[0]).write_text("goals: 3\n")
    current = paths.active.read_bytes()
    with pytest.raises(AgentStateError, match="'goals' must be a list"):
        restore(paths, ids[0], "after", NOW)
    assert paths.active.read_bytes() == current
    assert not list(paths.scratch.glob("prerestore_*"))


def test_restore_and_reset_wait_for_no_cycle(two_cycles: tuple[AgentPaths, list[str]]) -> None:
    paths, ids = two_cycles
    current = paths.active.read_bytes()
    with agent_lock(paths.lock):
        with pytest.raises(AgentLockedError):
            restore(paths, ids[0], "before", NOW)
        with pytest.raises(AgentLockedError):
            reset(paths, NOW)
    assert paths.active.read_bytes() == current


def test_reset_removes_active_and_keeps_snapshots(
    two_cycles: tuple[AgentPaths, list[str]],
) -> None:
    paths, _ = two_cycles
    snapshots = sorted(paths.scratch.glob("2*.yaml"))
    saved = reset(paths, NOW)
    assert not paths.active.exists()
    assert saved is not None and saved.name == "prereset_20250601_120000.yaml"
    assert sorted(paths.scratch.glob("2*.yaml")) == snapshots
    assert load_state(paths.active)["current_task"] is None  # the default state again
    assert reset(paths, NOW) is None  # nothing left to reset


def test_restore_and_reset_need_an_agent_directory(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match="scratchpad agent init"):
        reset(AgentPaths.of(tmp_path / "nothing"), NOW)
    with pytest.raises(AgentError, match="scratchpad agent init"):
        restore(AgentPaths.of(tmp_path / "nothing"), "20250101_000000", "after", NOW)


def test_cycle_ids_sort_by_time_then_suffix() -> None:
    ids = ["20250101_000000_10", "20250101_000000_2", "20250101_000001", "20250101_000000"]
    assert sorted(ids, key=cycle_key) == [
        "20250101_000000",
        "20250101_000000_2",
        "20250101_000000_10",
        "20250101_000001",
    ]


def test_prune_keeps_the_newest_by_suffix_order(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [reply("done")] * 11, clock=fixed_clock())
    ids = [agent.run_once() for _ in range(11)]
    prune(agent.paths, 2)
    left = {p.name.rsplit("_", 1)[0] for p in agent.paths.scratch.glob("2*.yaml")}
    assert left == {ids[9], ids[10]}  # _10 and _11, not _2 / _3 by text order
