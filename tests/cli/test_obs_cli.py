"""``scratchpad obs ls | read | gc`` against a real store in the test's home."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from scratchpad.cli.app import app
from scratchpad.observations import ObservationStore

runner = CliRunner()


def test_ls_read_and_gc() -> None:
    with ObservationStore() as store:
        kept = store.put("line one\nERROR two\nline three\n", turn_id="turn-1", step_num=1,
                         tool="fs_read")  # fmt: skip
        store.put("old", turn_id="turn-2", ttl_seconds=0.01)
    time.sleep(0.05)
    listing = runner.invoke(app, ["obs", "ls"])
    assert listing.exit_code == 0
    assert kept in listing.stdout and "turn-2" in listing.stdout
    only_turn = runner.invoke(app, ["obs", "ls", "--turn", "turn-1"])
    assert "turn-2" not in only_turn.stdout and "fs_read" in only_turn.stdout
    head = runner.invoke(app, ["obs", "read", kept, "--n", "8"])
    assert head.exit_code == 0
    assert "chars 0–8 of 30" in head.stdout and "line one" in head.stdout
    grep = runner.invoke(app, ["obs", "read", kept, "--mode", "grep", "--pattern", "ERROR"])
    assert "2:ERROR two" in grep.stdout
    gc = runner.invoke(app, ["obs", "gc"])
    assert gc.stdout.strip() == "removed 1 expired observation"


def test_bad_input_is_a_clear_error() -> None:
    missing = runner.invoke(app, ["obs", "read", "0123456789abcdef"])
    assert missing.exit_code == 2
    assert "no observation '0123456789abcdef'" in missing.stderr
    with ObservationStore() as store:
        entry = store.put("text", turn_id="t")
    bad_mode = runner.invoke(app, ["obs", "read", entry, "--mode", "sideways"])
    assert bad_mode.exit_code == 2 and "mode must be one of" in bad_mode.stderr
    bad_regex = runner.invoke(app, ["obs", "read", entry, "--mode", "grep", "--pattern", "("])
    assert bad_regex.exit_code == 2 and "invalid regular expression" in bad_regex.stderr


def test_a_too_slow_grep_pattern_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRATCHPAD_OBSERVATION_GREP_TIMEOUT_S", "0.2")
    with ObservationStore() as store:
        entry = store.put("a" * 30 + "!\n", turn_id="t")
    slow = runner.invoke(app, ["obs", "read", entry, "--mode", "grep", "--pattern", "(a|a)+$"])
    assert slow.exit_code == 2
    assert "grep stopped after 0.2s" in slow.stderr and "Simplify it" in slow.stderr
