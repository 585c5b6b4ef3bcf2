"""Terminal safety: text from cells, models and servers reaches the terminal with its control
sequences shown, not acted on; ordinary text and Unicode stay as they are; ``--json`` stays
exact JSON without raw control characters."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from scratchpad.agent import SessionEvent
from scratchpad.cli.app import app
from scratchpad.cli.chat import Screen
from scratchpad.cli.output import print_json, safe_text
from scratchpad.memory.layout import AgentPaths
from scratchpad.memory.state import load_state, save_state
from scratchpad.observations import ObservationStore

runner = CliRunner()
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
TITLE = "\x1b]0;pwned\x07"
SHOWN_TITLE = "\\x1b]0;pwned\\x07"
PLAIN = "café 漢字 🎉 :thumbs_up: [bold]x[/bold]\ttab"

# Cell source in plain ASCII: the control characters exist only once the cell runs.
EVIL_CELL = r"""
import sys
class Evil:
    def __repr__(self):
        return "\x1b]0;pwned\x07 \x1b[2J repr"
print("out \x1b]0;pwned\x07 \x1b[2J \x1b[5;5H \x07 \x9b6n \x7f \r", end=" ")
print("café 漢字 🎉 :thumbs_up: [bold]x[/bold]\ttab")
print("err \x1b[31mred\x1b[0m", file=sys.stderr)
progress("\x1b]0;progress\x07 step")
display(Evil())
Evil()
"""


def scratchpad(*args: str) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "scratchpad.cli", *args]
    return subprocess.run(command, capture_output=True, timeout=90)


def assert_no_raw_controls(data: bytes) -> str:
    text = data.decode("utf-8")
    assert not RAW_CONTROL.search(text), repr(text)
    return text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (TITLE, SHOWN_TITLE),
        ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),
        ("up\x1b[1A\x1b[2Kgone", "up\\x1b[1A\\x1b[2Kgone"),
        ("bell\x07", "bell\\x07"),
        ("\x9b31m c1 \x85 \x9d", "\\x9b31m c1 \\x85 \\x9d"),
        ("del\x7f nul\x00 bs\x08 cr\r", "del\\x7f nul\\x00 bs\\x08 cr\\x0d"),
        ("lone \ud800 surrogate", "lone \ufffd surrogate"),
        ("lines\nand\ttabs", "lines\nand\ttabs"),
        (PLAIN, PLAIN),
    ],
)
def test_safe_text_shows_controls_and_keeps_text(raw: str, shown: str) -> None:
    assert safe_text(raw) == shown


@given(st.text())
def test_safe_text_leaves_no_control_and_changes_nothing_else(text: str) -> None:
    safe = safe_text(text)
    assert not RAW_CONTROL.search(safe)
    safe.encode("utf-8")  # writable: no lone surrogates (else UnicodeEncodeError)
    assert safe_text(safe) == safe
    if not RAW_CONTROL.search(text) and not re.search("[\ud800-\udfff]", text):
        assert safe == text


def test_print_json_is_exact_and_has_no_raw_controls(capsys: pytest.CaptureFixture[str]) -> None:
    value = {"text": f"{TITLE} \x9b31m \x7f {PLAIN} \ud800"}
    print_json(value)
    out = capsys.readouterr().out
    assert not RAW_CONTROL.search(out)
    assert json.loads(out) == value
    assert "café 漢字 🎉" in out  # Unicode stays readable


def test_exec_view_and_dump_never_send_control_sequences_to_the_terminal() -> None:
    done = scratchpad("exec", "evil", EVIL_CELL)
    assert done.returncode == 0, done.stderr
    out, err = assert_no_raw_controls(done.stdout), assert_no_raw_controls(done.stderr)
    assert f"out {SHOWN_TITLE} \\x1b[2J \\x1b[5;5H \\x07 \\x9b6n \\x7f \\x0d {PLAIN}" in out
    assert f"Out: {SHOWN_TITLE} \\x1b[2J repr" in out
    assert "err \\x1b[31mred\\x1b[0m" in err
    assert "\\x1b]0;progress\\x07 step" in err
    failed = scratchpad("exec", "evil", r"raise ValueError('\x1b]0;pwned\x07')")
    assert failed.returncode == 1
    assert f"ValueError: {SHOWN_TITLE}" in assert_no_raw_controls(failed.stderr)
    for command in ("view", "dump"):
        shown = scratchpad(command, "evil")
        assert shown.returncode == 0, shown.stderr
        assert SHOWN_TITLE in assert_no_raw_controls(shown.stdout)
        assert PLAIN in shown.stdout.decode()


def test_exec_json_keeps_values_exact_without_raw_controls() -> None:
    done = scratchpad("exec", "evil", "--json", EVIL_CELL)
    assert done.returncode == 0, done.stderr
    cell = json.loads(assert_no_raw_controls(done.stdout))
    assert cell["stdout"].startswith(f"out {TITLE} \x1b[2J")
    assert cell["result"] == f"{TITLE} \x1b[2J repr"


def test_obs_read_shows_stored_controls_escaped() -> None:
    with ObservationStore() as store:
        entry = store.put(f"log {TITLE} line\n{PLAIN}", turn_id="t")
    result = runner.invoke(app, ["obs", "read", entry, "--mode", "full"])
    assert result.exit_code == 0, result.stderr
    assert not RAW_CONTROL.search(result.stdout)
    assert f"log {SHOWN_TITLE} line" in result.stdout and PLAIN in result.stdout


def test_agent_status_shows_state_controls_escaped(tmp_path: Path) -> None:
    root = tmp_path / "agent"
    assert runner.invoke(app, ["agent", "init", str(root)]).exit_code == 0
    paths = AgentPaths.of(root)
    state = load_state(paths.active)
    state["goals"] = [f"goal {TITLE}"]
    state["current_task"] = "\x1b[2J wipe"
    save_state(paths.active, state)
    result = runner.invoke(app, ["agent", "status", str(root)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    assert not RAW_CONTROL.search(result.stdout)
    assert f"goal {SHOWN_TITLE}" in result.stdout and "\\x1b[2J wipe" in result.stdout


def test_chat_shows_model_and_tool_text_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = [
        SessionEvent("text_delta", {"text": f"answer {TITLE}"}),
        SessionEvent("tool_call", {"name": "scratchpad", "input": {"code": f"print('{TITLE}')"}}),
        SessionEvent("tool_progress", {"message": f"step {TITLE}"}),
        SessionEvent("tool_result", {"ok": True, "text": f"[output]\n{TITLE}"}),
    ]
    screen = Screen(tmp_path)
    for event in events:
        screen.show(event)
    captured = capsys.readouterr()
    for stream in (captured.out, captured.err):
        assert not RAW_CONTROL.search(stream)
    assert f"answer {SHOWN_TITLE}" in captured.out
    assert captured.err.count(SHOWN_TITLE) == 3  # the code, the progress message, the result


def test_what_the_cli_prints_is_scrubbed() -> None:
    from scratchpad.scrub import scrubber

    scrubber().add("agent-summary-secret-1", "DS_X__TOKEN")
    assert safe_text("the summary: agent-summary-secret-1\x1b[2J") == (
        "the summary: [DS_X__TOKEN]\\x1b[2J"
    )
