"""Whole cycles driven by a scripted model: the six events, outcomes, failures, ids, config."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from scratchpad.config import Settings
from scratchpad.errors import AgentError, AgentStateError, ConfigError
from scratchpad.memory import (
    AgentConfig,
    CycleAgent,
    ScriptedModel,
    ToolsConfig,
    agent_status,
    default_state,
    init_agent,
    load_state,
    read_records,
    toolbox,
)
from scratchpad.memory.layout import AgentPaths
from scratchpad.memory.snapshots import cycle_key, diff
from scratchpad.memory.state import dump_state
from scratchpad.observations import ObservationStore
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.scrub import register
from tests.memory.helpers import RULES, fixed_clock, make_agent, moving_clock, reply
from tests.runtime.attacks import gone

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$")


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def load_yaml(path: Path) -> dict[str, object]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


# -- outcomes --------------------------------------------------------------------------------
def test_a_cycle_that_completes(tmp_path: Path) -> None:
    root = tmp_path / "agent"
    agent, model = make_agent(
        root,
        [
            reply(
                "update_scratchpad",
                goals=["ship"],
                current_task="write docs",
                pending_actions=["review", "release"],
            ),
            reply("done", summary="docs written"),
            reply("echo", text="never asked"),
        ],
    )
    result = agent.run()
    assert result.outcome == "done" and result.iterations == 2
    assert result.summary == "docs written"
    state = load_state(AgentPaths.of(root).active)
    assert state["current_task"] == "review" and state["pending_actions"] == ["release"]
    assert state["completed_tasks"] == [{"task": "write docs", "summary": "docs written"}]
    assert state["notes"] == "\n[COMPLETED] docs written"
    assert model.remaining == 1  # the cycle ended at done
    assert [r.outcome for r in read_records(AgentPaths.of(root).cycles_log)] == ["done"]


def test_max_iterations_without_done(tmp_path: Path) -> None:
    config = AgentConfig(max_iterations=3, tools=ToolsConfig(pads=False))
    agent, model = make_agent(
        tmp_path, [reply("echo", text=str(n)) for n in range(5)], config=config
    )
    result = agent.run()
    assert (result.outcome, result.iterations) == ("max_iterations", 3)
    assert len(model.prompts) == 3
    notes = load_state(AgentPaths.of(tmp_path).active)["notes"]
    assert notes == "".join(f'\n[TOOL] echo({{"text": "{n}"}}) → {n}' for n in range(3))


def test_the_default_is_ten_iterations(tmp_path: Path) -> None:
    agent, model = make_agent(tmp_path, ["{}"] * 12)
    assert agent.run().iterations == 10 and len(model.prompts) == 10


def test_parse_errors_are_noted_and_the_loop_goes_on(tmp_path: Path) -> None:
    agent, _ = make_agent(
        tmp_path,
        [
            "I think I should update my notes.",
            "```json\n" + reply("update_scratchpad", goals=["g"]) + "\n```",
            "```json\n{broken\n```",
            reply("done", summary="ok"),
        ],
    )
    result = agent.run()
    assert result.outcome == "done" and result.iterations == 4
    state = load_state(AgentPaths.of(tmp_path).active)
    assert state["goals"] == ["g"]  # the fenced reply was understood
    lines = state["notes"].splitlines()
    assert lines[0] == ""
    assert lines[1].startswith("[PARSE ERROR] not valid JSON")
    assert lines[2].startswith("[PARSE ERROR] not valid JSON")
    assert lines[3] == "[COMPLETED] ok"


def test_tool_calls_go_through_the_registry(tmp_path: Path) -> None:
    agent, model = make_agent(
        tmp_path, [reply("echo", text="ping"), reply("shell", command="ls"), reply("done")]
    )
    agent.run()
    notes = load_state(AgentPaths.of(tmp_path).active)["notes"]
    assert '[TOOL] echo({"text": "ping"}) → ping' in notes
    assert "[TOOL] shell(" in notes and "Unknown tool 'shell'" in notes  # off by default
    assert "- echo:" in model.prompts[0][1] and "- shell:" not in model.prompts[0][1]


def test_each_prompt_is_built_from_the_current_state(tmp_path: Path) -> None:
    agent, model = make_agent(
        tmp_path,
        [reply("update_scratchpad", current_task="task A"), reply("echo", text="x"), "oops"],
        config=AgentConfig(max_iterations=3, tools=ToolsConfig(pads=False)),
    )
    agent.run()
    systems = {system for system, _ in model.prompts}
    assert systems == {RULES}
    first, second, third = (user for _, user in model.prompts)
    assert "current_task: null" in first and "step 1 of 3" in first
    assert "current_task: task A" in second and "step 2 of 3" in second
    assert "[TOOL] echo" in third


def test_the_rules_come_from_rules_md(tmp_path: Path) -> None:
    paths, _ = init_agent(tmp_path / "agent")
    paths.rules.write_text("Be brief.")
    model = ScriptedModel([reply("done")])
    CycleAgent(paths.root, model, config=AgentConfig(tools=ToolsConfig(pads=False))).run()
    assert model.prompts[0][0] == "Be brief."


def test_without_rules_the_cycle_refuses_and_writes_nothing(tmp_path: Path) -> None:
    model = ScriptedModel([reply("done")])
    with pytest.raises(AgentError, match=r"RULES\.md not found.*scratchpad agent init"):
        CycleAgent(tmp_path / "agent", model).run()
    assert not (tmp_path / "agent").exists()


def test_the_cycle_log_and_outcome_line_hold_no_secret(tmp_path: Path) -> None:
    """A secret the model wrote in a reply (or an error that quotes one) reaches the cycle's
    log and ``cycles.jsonl`` as its label, as in every other log."""
    register([("agent-s3cret-77", "DS_PG_PROD__PASSWORD")])
    agent, _ = make_agent(
        tmp_path,
        [
            reply("update_scratchpad", current_task="log in with agent-s3cret-77"),
            reply("done", summary="used agent-s3cret-77"),
        ],
    )
    result = agent.run()
    assert result.outcome == "done"
    paths = AgentPaths.of(tmp_path)
    for path in (paths.cycle_log(result.cycle_id), paths.cycles_log):
        text = path.read_text()
        assert "agent-s3cret-77" not in text
        assert "[DS_PG_PROD__PASSWORD]" in text


# -- failure ---------------------------------------------------------------------------------
def test_a_raising_cycle_keeps_the_state_and_logs_the_traceback(tmp_path: Path) -> None:
    paths = AgentPaths.of(tmp_path)
    start = default_state()
    start.update(goals=["keep me"], notes="old notes", current_task="t")
    paths.scratch.mkdir()
    paths.active.write_text(dump_state(start))
    agent, _ = make_agent(
        tmp_path,
        [
            reply("update_scratchpad", goals=["lost"], current_task="changed"),
            RuntimeError("provider exploded"),
        ],
    )
    result = agent.run()
    cycle = result.cycle_id
    assert result.outcome == "failed" and result.iterations == 2
    assert result.error == "RuntimeError: provider exploded"
    after = load_yaml(paths.after(cycle))
    failure = f"Cycle {cycle} failed: RuntimeError: provider exploded"
    expected = dict(start, notes=f"old notes\n{failure}")
    assert after == expected  # the before-state, with the failure appended to its notes
    active = load_yaml(paths.active)
    assert active == dict(expected, last_updated=active["last_updated"])
    assert active["last_updated"] is not None
    log = paths.cycle_log(cycle).read_text()
    assert "Traceback (most recent call last)" in log
    assert "RuntimeError: provider exploded" in log
    assert read_records(paths.cycles_log)[-1].error == "RuntimeError: provider exploded"


def test_a_failed_cycle_appends_to_notes_over_the_cap_and_archives_the_oldest(
    tmp_path: Path,
) -> None:
    paths = AgentPaths.of(tmp_path)
    start = default_state()
    old = "\n".join(f"note {n:04d} " + "." * 90 for n in range(80))  # 8000 characters
    start.update(notes=old)
    paths.scratch.mkdir()
    paths.active.write_text(dump_state(start))
    config = AgentConfig(notes_cap_chars=8000, tools=ToolsConfig(pads=False))
    agent, _ = make_agent(tmp_path, [RuntimeError("boom")], config=config)
    result = agent.run()
    assert result.outcome == "failed"
    notes = load_state(paths.active)["notes"]
    assert notes.endswith(f"\nCycle {result.cycle_id} failed: RuntimeError: boom")
    assert notes.startswith("[ARCHIVED]") and len(notes) <= 8000
    assert "note 0079" in notes  # the newest notes stay
    archived = (paths.archive / f"{result.cycle_id}.md").read_text()
    assert "note 0000" in archived and "note 0000" not in notes  # the oldest moved, not lost
    assert load_yaml(paths.after(result.cycle_id))["notes"] == notes


def test_a_model_that_runs_out_fails_the_cycle(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [])
    result = agent.run()
    assert result.outcome == "failed" and "ran out of replies" in (result.error or "")


def test_bad_yaml_stops_the_wake_and_nothing_is_overwritten(tmp_path: Path) -> None:
    paths = AgentPaths.of(tmp_path)
    paths.scratch.mkdir()
    paths.active.write_text("goals: [a\npending_actions: 5\n")
    original = paths.active.read_bytes()
    agent, model = make_agent(tmp_path, [reply("done")])
    with pytest.raises(AgentStateError, match=r"active\.yaml: not valid YAML"):
        agent.run()
    assert paths.active.read_bytes() == original
    assert list(paths.scratch.iterdir()) == [paths.active]  # no snapshot
    assert model.prompts == []
    assert read_records(paths.cycles_log)[-1].outcome == "failed"


def test_a_wrong_type_stops_the_wake_naming_the_key(tmp_path: Path) -> None:
    paths = AgentPaths.of(tmp_path)
    paths.scratch.mkdir()
    paths.active.write_text("pending_actions: 5\n")
    agent, _ = make_agent(tmp_path, [reply("done")])
    with pytest.raises(AgentStateError, match="key 'pending_actions' must be a list"):
        agent.run()
    assert paths.active.read_text() == "pending_actions: 5\n"


# -- the six events --------------------------------------------------------------------------
def test_before_is_the_default_state_dumped_when_active_is_missing(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [reply("done")])
    cycle = agent.run_once()
    paths = AgentPaths.of(tmp_path)
    assert paths.before(cycle).read_text() == dump_state(default_state())


def test_before_after_and_active_relate_exactly(tmp_path: Path) -> None:
    paths = AgentPaths.of(tmp_path)
    paths.scratch.mkdir()
    hand_written = "# edited by hand\ngoals:   [one]   # keep\r\nnotes: 'x'\ncustom: 1\n"
    paths.active.write_bytes(hand_written.encode())
    agent, _ = make_agent(
        tmp_path,
        [
            reply("update_scratchpad", current_task="t1"),
            reply("done", summary="s1"),
            reply("echo", text="second cycle"),
            reply("done", summary="s2"),
        ],
        clock=moving_clock(),
    )
    first = agent.run_once()
    assert paths.before(first).read_bytes() == hand_written.encode()  # an exact copy
    after = load_yaml(paths.after(first))
    active = load_yaml(paths.active)
    assert after["last_updated"] is None  # _after does not stamp
    assert isinstance(active["last_updated"], str) and ISO.match(active["last_updated"])
    assert {k: v for k, v in active.items() if k != "last_updated"} == {
        k: v for k, v in after.items() if k != "last_updated"
    }
    assert after["custom"] == 1 and after["completed_tasks"] == [{"task": "t1", "summary": "s1"}]
    active_bytes = paths.active.read_bytes()
    second = agent.run_once()
    assert paths.before(second).read_bytes() == active_bytes  # the next wake reads this file
    assert load_yaml(paths.after(second))["last_updated"] == active["last_updated"]
    assert str(load_yaml(paths.active)["last_updated"]) > str(active["last_updated"])  # again


def test_the_state_file_is_read_once_per_cycle(tmp_path: Path) -> None:
    """Editing active.yaml while the cycle runs changes nothing: the wake read it already."""
    paths = AgentPaths.of(tmp_path)

    class EditingModel(ScriptedModel):
        async def complete(self, *, system: str, user: str) -> str:
            paths.active.write_text("goals: [edited meanwhile]\n")
            return await super().complete(system=system, user=user)

    model = EditingModel([reply("echo", text="a"), reply("done")])
    cycle = CycleAgent(tmp_path, model, rules=RULES, config=AgentConfig()).run_once()
    assert load_state(paths.after(cycle))["goals"] == []
    assert load_state(paths.active)["goals"] == []


def test_cycles_in_the_same_second_get_suffixes(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [reply("done")] * 12, clock=fixed_clock())
    ids = [agent.run_once() for _ in range(11)]
    assert ids[:3] == ["20250304_050607", "20250304_050607_2", "20250304_050607_3"]
    assert ids[-1] == "20250304_050607_11"
    paths = AgentPaths.of(tmp_path)
    assert all(paths.before(i).exists() and paths.after(i).exists() for i in ids)
    assert [r.cycle_id for r in read_records(paths.cycles_log)] == ids


def test_real_clock_ids_are_unique_and_sortable(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [reply("done")] * 5)
    ids = [agent.run_once() for _ in range(5)]
    assert len(set(ids)) == 5
    assert all(re.fullmatch(r"\d{8}_\d{6}(_\d+)?", i) for i in ids)
    assert sorted(ids, key=cycle_key) == ids  # history lists them in the order they ran
    started = dt.datetime.strptime(ids[0][:15], "%Y%m%d_%H%M%S").replace(tzinfo=dt.UTC)
    assert abs(dt.datetime.now(dt.UTC) - started) < dt.timedelta(minutes=1)  # UTC start time


def test_ids_keep_their_order_when_the_local_clock_goes_back(tmp_path: Path) -> None:
    """The end of summer time: 02:30 CEST, then 02:10 CET (40 minutes later in UTC)."""
    cest, cet = dt.timezone(dt.timedelta(hours=2)), dt.timezone(dt.timedelta(hours=1))
    now = [dt.datetime(2025, 10, 26, 2, 30, tzinfo=cest)]
    config = AgentConfig(keep_last=1, tools=ToolsConfig(pads=False))
    agent, _ = make_agent(
        tmp_path,
        [reply("done", summary="one"), reply("done", summary="two")],
        config=config,
        clock=lambda: now[0],
    )
    first = agent.run_once()
    now[0] = dt.datetime(2025, 10, 26, 2, 10, tzinfo=cet)
    second = agent.run_once()
    assert (first, second) == ("20251026_003000", "20251026_011000")  # UTC
    paths = AgentPaths.of(tmp_path)
    assert paths.after(second).exists() and not paths.after(first).exists()  # kept the last
    last = agent_status(paths).last
    assert diff(paths).cycle_id == second and last is not None and last.cycle_id == second
    assert load_yaml(paths.active)["last_updated"] == "2025-10-26T02:10:00+01:00"  # local


def test_retention_keeps_the_last_snapshots(tmp_path: Path) -> None:
    config = AgentConfig(keep_last=2, tools=ToolsConfig(pads=False))
    agent, _ = make_agent(tmp_path, [reply("done")] * 4, config=config, clock=fixed_clock())
    ids = [agent.run_once() for _ in range(4)]
    snapshots = sorted(p.name for p in AgentPaths.of(tmp_path).scratch.glob("2*.yaml"))
    assert snapshots == sorted(f"{i}_{w}.yaml" for i in ids[2:] for w in ("before", "after"))
    assert len(list(AgentPaths.of(tmp_path).logs.glob("cycle_*.log"))) == 4  # logs stay


# -- notes cap -------------------------------------------------------------------------------
def test_notes_over_the_cap_move_to_an_archive_file(tmp_path: Path) -> None:
    paths = AgentPaths.of(tmp_path)
    paths.scratch.mkdir()
    start = default_state()
    start["notes"] = "".join(f"old note {n:04d}\n" for n in range(300))  # ~4800 chars
    paths.active.write_text(dump_state(start))
    config = AgentConfig(notes_cap_chars=1000, tools=ToolsConfig(pads=False))
    agent, model = make_agent(tmp_path, [reply("echo", text="new"), reply("done")], config=config)
    cycle = agent.run_once()
    notes = load_state(paths.active)["notes"]
    assert len(notes) <= 1000
    pointer, *rest = notes.split("\n")
    assert pointer.startswith("[ARCHIVED] ") and f"notes_archive/{cycle}.md" in pointer
    assert rest[0].startswith("old note ")  # cut at a line start
    assert notes.endswith("[COMPLETED] ")
    archived = (tmp_path / "notes_archive" / f"{cycle}.md").read_text()
    assert "old note 0000\n" in archived
    kept = "\n".join(rest)
    for n in range(300):  # every note is in one place or the other
        assert f"old note {n:04d}" in archived or f"old note {n:04d}" in kept
    assert all(len(user) < 3000 for _, user in model.prompts)  # the prompt stays bounded


def test_notes_over_the_cap_go_to_the_observation_store(tmp_path: Path) -> None:
    store = ObservationStore(tmp_path / "obs.db", settings=Settings(home=tmp_path))
    config = AgentConfig(notes_cap_chars=1000, tools=ToolsConfig(pads=False))
    replies = [reply("echo", text="y" * 280) for _ in range(6)]
    agent, model = make_agent(tmp_path / "agent", [*replies, reply("done")], config=config)
    agent.store = store
    agent.run_once()
    notes = load_state(AgentPaths.of(tmp_path / "agent").active)["notes"]
    pointer = notes.split("\n")[0]
    match = re.search(r"observation ([0-9a-f]{16})", pointer)
    assert match and "(read_observation)" in pointer
    assert "[TOOL] echo" in store.read(match.group(1), "full").content
    assert len(notes) <= 1000
    # registered because there is a store; offered from the first prompt after an archive
    offered = ["- read_observation:" in user for _, user in model.prompts]
    assert not offered[0] and offered[-1] and offered == sorted(offered)
    store.close()


# -- config and tools ------------------------------------------------------------------------
def test_config_is_read_from_the_agent_directory(tmp_path: Path) -> None:
    paths, _ = init_agent(tmp_path / "agent")
    paths.config.write_text("max_iterations: 2\ntools:\n  pads: false\n")
    model = ScriptedModel(["{}"] * 5)
    result = CycleAgent(paths.root, model).run()
    assert (result.outcome, result.iterations) == ("max_iterations", 2)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("max_iterations: lots\n", ["'max_iterations'", "valid integer", "'lots'"]),
        ("max_iteration: 3\n", ["'max_iteration' is not a setting"]),
        ("tools:\n  shell: maybe\n", ["'tools.shell'", "valid boolean"]),
        ("keep_last: 0\n", ["'keep_last'", "greater than or equal to 1"]),
        ("[1, 2]\n", ["must be a mapping"]),
        ("a: [\n", ["not valid YAML"]),
    ],
)
def test_a_bad_config_names_the_file_and_the_key(
    tmp_path: Path, text: str, words: list[str]
) -> None:
    paths, _ = init_agent(tmp_path / "agent")
    paths.config.write_text(text)
    with pytest.raises(ConfigError) as caught:
        CycleAgent(paths.root, ScriptedModel([]))
    assert str(paths.config) in str(caught.value)
    for word in words:
        assert word in str(caught.value)


def test_the_starter_config_is_all_defaults(tmp_path: Path) -> None:
    paths, written = init_agent(tmp_path / "agent")
    assert set(written) == {paths.rules, paths.config, paths.active}
    agent = CycleAgent(paths.root, ScriptedModel([]))
    assert agent.config == AgentConfig()
    assert init_agent(paths.root)[1] == []  # a second init keeps every file


def test_shell_is_offered_and_runs_only_when_enabled(tmp_path: Path) -> None:
    config = AgentConfig(tools=ToolsConfig(pads=False, shell=True, shell_timeout_s=10))
    agent, model = make_agent(
        tmp_path / "agent", [reply("shell", command="pwd; exit 3"), reply("done")], config=config
    )
    agent.run()
    assert "- shell:" in model.prompts[0][1]
    notes = load_state(AgentPaths.of(tmp_path / "agent").active)["notes"]
    assert f"{tmp_path / 'agent' / 'workspace'}\n[exit code 3]" in notes  # its workspace, code


def test_the_pad_tool_runs_cells_in_a_real_pad(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pads under ROOT/.scratchpad, working in ROOT/workspace; the cycle lets go of them at
    the end (a local kernel is closed with the cycle's loop)."""
    monkeypatch.setenv("SCRATCHPAD_KERNEL_START_TIMEOUT_S", "20")
    code = {"action": "exec", "name": "main", "code": "import os\nos.getcwd()"}
    config = AgentConfig(tools=ToolsConfig(pads=True))
    agent, model = make_agent(
        tmp_path / "agent", [reply("scratchpad", **code), reply("done")], config=config
    )
    result = agent.run()
    assert result.outcome == "done"
    assert "- scratchpad:" in model.prompts[0][1]
    notes = load_state(agent.paths.active)["notes"]
    assert f"→ [result]\n{str(agent.paths.workspace)!r}" in notes
    venv = agent.paths.root / ".scratchpad" / "pads" / "main"
    assert asyncio.run(gone(str(venv))) == []  # the kernel was closed with the cycle
    assert venv.is_dir()  # its venv stays


class RecordingManager(ScratchpadManager):
    """A real manager that records how the cycle lets go of it."""

    built: ClassVar[list[RecordingManager]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[str] = []
        RecordingManager.built.append(self)

    async def detach_all(self) -> None:
        self.calls.append("detach_all")
        await super().detach_all()

    async def close_all(self, *, reason: str = "the pad was closed") -> None:
        self.calls.append("close_all")
        await super().close_all(reason=reason)


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> list[RecordingManager]:
    RecordingManager.built = []

    def recorded(paths: AgentPaths, settings: Settings) -> ScratchpadManager:
        with monkeypatch.context() as patched:
            patched.setattr(toolbox, "ScratchpadManager", RecordingManager)
            return toolbox.agent_manager(paths, settings)

    monkeypatch.setattr("scratchpad.memory.cycle.agent_manager", recorded)
    return RecordingManager.built


def test_a_manager_the_agent_built_is_detached_not_closed(
    tmp_path: Path, recording: list[RecordingManager]
) -> None:
    """detach_all: local pads close, remote pads stay on their server for other tools."""
    config = AgentConfig(tools=ToolsConfig(pads=True))
    agent, _ = make_agent(tmp_path, [reply("done"), reply("done")], config=config)
    agent.run_once()
    agent.run_once()
    assert [m.calls for m in recording] == [["detach_all"], ["detach_all"]]  # one per cycle


def test_a_manager_passed_in_is_left_to_its_owner(
    tmp_path: Path, recording: list[RecordingManager]
) -> None:
    manager = RecordingManager(workspace=tmp_path / "ws", settings=Settings(home=tmp_path))
    agent, _ = make_agent(
        tmp_path / "agent", [reply("done")], config=AgentConfig(), manager=manager
    )
    assert agent.run().outcome == "done"
    assert recording == [manager] and manager.calls == []


def test_without_pads_no_manager_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recording: list[RecordingManager]
) -> None:
    monkeypatch.setenv("SCRATCHPAD_BACKEND", "nonsense")  # a pad setting that would not load
    agent, _ = make_agent(tmp_path, [reply("echo", text="hi"), reply("done")])
    assert agent.run().outcome == "done"
    assert recording == []
    assert "→ hi" in load_state(agent.paths.active)["notes"]


def test_a_bad_pad_setting_stops_the_cycle_before_the_wake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCRATCHPAD_BACKEND", "nonsense")
    agent, model = make_agent(tmp_path / "agent", [reply("done")], config=AgentConfig())
    with pytest.raises(ConfigError, match=r"SCRATCHPAD_BACKEND.*pads: false"):
        agent.run()
    assert not (tmp_path / "agent").exists() and model.prompts == []  # nothing written


async def test_run_inside_an_event_loop_is_refused(tmp_path: Path) -> None:
    agent, model = make_agent(tmp_path / "agent", [reply("done")])
    with pytest.raises(AgentError, match=r"await asyncio\.to_thread\(agent\.run_once\)"):
        agent.run_once()
    assert not (tmp_path / "agent").exists() and model.prompts == []
    assert (await asyncio.to_thread(agent.run)).outcome == "done"  # the way it is meant


def test_the_error_in_the_failure_note_is_capped(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [RuntimeError("x" * 50_000)])
    result = agent.run()
    notes = load_state(agent.paths.active)["notes"]
    assert notes.startswith(f"\nCycle {result.cycle_id} failed: RuntimeError: xxx")
    assert len(notes) < 2200 and "more characters in the cycle's log" in notes
    assert result.error is not None and len(result.error) < 2200
    assert "x" * 50_000 in agent.paths.cycle_log(result.cycle_id).read_text()  # all of it


def test_a_lone_surrogate_from_the_model_does_not_break_the_cycle(tmp_path: Path) -> None:
    agent, _ = make_agent(
        tmp_path, ['{"tool": "update_scratchpad", "args": {"goals": ["\\ud800"]}}', reply("done")]
    )
    assert agent.run().outcome == "done"
    assert load_state(AgentPaths.of(tmp_path).active)["goals"] == ["\ufffd\ufffd\ufffd"]


def test_the_log_tells_the_story_of_the_cycle(tmp_path: Path) -> None:
    agent, _ = make_agent(tmp_path, [reply("echo", text="a"), "junk", reply("done", summary="s")])
    cycle = agent.run_once()
    log = AgentPaths.of(tmp_path).cycle_log(cycle).read_text()
    for phrase in ("started", "wake", "step 1: reply:", "[TOOL] echo", "[PARSE ERROR]", "done"):
        assert phrase in log
    assert log.rstrip().endswith("outcome: done after 3 step(s)")
