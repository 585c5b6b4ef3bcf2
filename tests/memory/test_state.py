"""The state file: defaults, validation with clear errors, and YAML that round-trips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpad.errors import AgentStateError
from scratchpad.memory import default_state, load_state, save_state
from scratchpad.memory.state import (
    DEFAULT_STATE,
    clear_stale_temps,
    dump_state,
    parse_state,
    read_state,
)


def test_missing_file_loads_the_default_state(tmp_path: Path) -> None:
    path = tmp_path / "active.yaml"
    assert load_state(path) == dict(DEFAULT_STATE)
    assert list(load_state(path)) == [
        "goals",
        "current_task",
        "pending_actions",
        "completed_tasks",
        "notes",
        "last_updated",
    ]
    assert not path.exists()


def test_default_state_is_a_fresh_copy_each_time() -> None:
    first = default_state()
    first["goals"].append("changed")
    assert default_state()["goals"] == []


def test_missing_keys_are_filled_and_unknown_keys_kept_in_order(tmp_path: Path) -> None:
    path = tmp_path / "active.yaml"
    path.write_text("mood: curious\ngoals: [ship it]\nextra: {a: 1}\n")
    state = load_state(path)
    assert state["goals"] == ["ship it"]
    assert state["pending_actions"] == [] and state["notes"] == ""
    assert state["mood"] == "curious" and state["extra"] == {"a": 1}
    assert list(state)[-2:] == ["mood", "extra"]


def test_null_values_count_as_missing(tmp_path: Path) -> None:
    path = tmp_path / "active.yaml"
    path.write_text("goals:\npending_actions:\nnotes:\n")
    state = load_state(path)
    assert state["goals"] == [] and state["pending_actions"] == [] and state["notes"] == ""


def test_an_empty_file_is_the_default_state(tmp_path: Path) -> None:
    path = tmp_path / "active.yaml"
    path.write_text("# nothing yet\n")
    assert load_state(path) == dict(DEFAULT_STATE)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("pending_actions: 5\n", ["'pending_actions'", "must be a list", "int 5"]),
        ("goals: write tests\n", ["'goals'", "must be a list", "str 'write tests'"]),
        ("notes: [a, b]\n", ["'notes'", "must be text", "list"]),
        ("last_updated: [x]\n", ["'last_updated'", "an ISO time or null"]),
        ("completed_tasks: {a: 1}\n", ["'completed_tasks'", "must be a list"]),
    ],
)
def test_a_wrong_type_names_the_file_and_the_key(
    tmp_path: Path, text: str, words: list[str]
) -> None:
    path = tmp_path / "active.yaml"
    path.write_text(text)
    with pytest.raises(AgentStateError) as caught:
        load_state(path)
    message = str(caught.value)
    assert str(path) in message
    for word in words:
        assert word in message
    assert "scratchpad agent restore" in message  # says what to do
    assert path.read_text() == text  # never touched


def test_invalid_yaml_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "active.yaml"
    broken = "goals: [unclosed\nnotes: x\n"
    path.write_text(broken)
    with pytest.raises(AgentStateError, match="not valid YAML") as caught:
        load_state(path)
    assert str(path) in str(caught.value) and "line " in str(caught.value)
    assert path.read_text() == broken


@pytest.mark.parametrize(
    ("text", "what"),
    [("- a\n- b\n", "list"), ("just text\n", "str"), ("1: x\n", "key 1 is not text")],
)
def test_a_state_that_is_not_a_mapping_of_text_keys_is_refused(
    tmp_path: Path, text: str, what: str
) -> None:
    with pytest.raises(AgentStateError, match=what):
        parse_state(text, tmp_path / "active.yaml")


def test_bytes_that_are_not_utf8_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "active.yaml"
    path.write_bytes(b"notes: \xff\xfe\n")
    with pytest.raises(AgentStateError, match="not UTF-8"):
        load_state(path)


def test_an_unquoted_timestamp_typed_by_hand_becomes_text(tmp_path: Path) -> None:
    path = tmp_path / "active.yaml"
    path.write_text("last_updated: 2025-01-02T03:04:05+00:00\n")
    assert load_state(path)["last_updated"] == "2025-01-02T03:04:05+00:00"


def test_read_state_keeps_the_exact_text(tmp_path: Path) -> None:
    path = tmp_path / "active.yaml"
    text = "# my goals\ngoals:   [a]   # spaced\r\nnotes: hi\n"
    path.write_bytes(text.encode())
    read = read_state(path)
    assert read.text == text and read.existed
    assert read.state["goals"] == ["a"]


def test_notes_are_dumped_as_a_readable_block(tmp_path: Path) -> None:
    state = default_state()
    state["notes"] = "first line\n[TOOL] echo({}) → ok\nlast line"
    text = dump_state(state)
    assert "notes: |" in text
    assert "\n  [TOOL] echo({}) → ok\n" in text  # unicode kept, one note per line
    path = tmp_path / "active.yaml"
    save_state(path, state)
    assert load_state(path) == state


def test_timestamps_stay_text_after_a_round_trip(tmp_path: Path) -> None:
    state = default_state()
    state["last_updated"] = "2025-01-02T03:04:05+00:00"
    assert parse_state(dump_state(state), "x")["last_updated"] == "2025-01-02T03:04:05+00:00"


def test_stale_temp_files_are_cleared(tmp_path: Path) -> None:
    (tmp_path / ".active.yaml.abc.tmp").write_text("half")
    (tmp_path / "active.yaml").write_text("goals: []\n")
    assert [p.name for p in clear_stale_temps(tmp_path)] == [".active.yaml.abc.tmp"]
    assert [p.name for p in tmp_path.iterdir()] == ["active.yaml"]


json_values: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(
    notes=st.text(max_size=200),
    goals=st.lists(st.text(max_size=30), max_size=4),
    task=json_values,
    extra=st.dictionaries(st.text(min_size=1, max_size=10), json_values, max_size=3),
)
def test_any_state_round_trips_through_yaml(
    notes: str, goals: list[str], task: Any, extra: dict[str, Any]
) -> None:
    state = default_state()
    state.update(notes=notes, goals=goals, current_task=task)
    for key, value in extra.items():
        state.setdefault(key, value)
    assert parse_state(dump_state(state), "hypothesis") == state


def test_text_utf8_cannot_store_is_replaced_not_fatal(tmp_path: Path) -> None:
    state = default_state()
    state["notes"] = "from a model: \ud800 and \x00 kept"
    state["extra"] = {"list": ["\udfff"]}
    path = tmp_path / "active.yaml"
    save_state(path, state)
    loaded = load_state(path)
    assert loaded["notes"] == "from a model: \ufffd\ufffd\ufffd and \x00 kept"
    assert loaded["extra"] == {"list": ["\ufffd\ufffd\ufffd"]}
