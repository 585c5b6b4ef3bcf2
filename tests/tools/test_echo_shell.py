"""The echo and shell tools, through a real registry and real subprocesses."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from scratchpad.tools.echo_tool import echo_tool
from scratchpad.tools.registry import ToolRegistry
from scratchpad.tools.shell_tool import CappedText, run_shell, shell_tool
from tests.process_helpers import process_gone


async def test_echo_gives_its_text_back() -> None:
    registry = ToolRegistry([echo_tool()])
    outcome = await registry.dispatch("echo", {"text": "héllo\nworld"}, None)
    assert outcome.ok and outcome.text == "héllo\nworld"
    refused = await registry.dispatch("echo", {"text": 5}, None)
    assert not refused.ok and "must be of type string" in refused.text


async def test_shell_reports_output_and_exit_code(tmp_path: Path) -> None:
    registry = ToolRegistry([shell_tool(cwd=tmp_path)])
    ok = await registry.dispatch("shell", {"command": "pwd; echo out; echo err >&2"}, None)
    assert ok.ok and ok.text == f"{tmp_path}\nout\nerr\n[exit code 0]"
    failed = await registry.dispatch("shell", {"command": "exit 7"}, None)
    assert not failed.ok and failed.reason == "exit_code"
    assert failed.text == "(no output)\n[exit code 7]"


async def test_shell_stdin_is_closed(tmp_path: Path) -> None:
    registry = ToolRegistry([shell_tool(cwd=tmp_path, timeout_s=10)])
    outcome = await registry.dispatch("shell", {"command": "cat; echo after"}, None)
    assert outcome.text == "after\n[exit code 0]"  # cat saw EOF at once


async def test_a_timeout_stops_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    command = f"sleep 60 & echo $! > {pid_file}; echo started; wait"
    registry = ToolRegistry([shell_tool(cwd=tmp_path, timeout_s=30)])
    began = time.monotonic()
    outcome = await registry.dispatch("shell", {"command": command, "timeout_s": 0.5}, None)
    assert time.monotonic() - began < 10
    assert not outcome.ok and outcome.reason == "timeout"
    assert outcome.text.startswith("started\n")  # what came before the timeout is kept
    assert "[timed out after 0.5s; stopped, exit code -15]" in outcome.text
    child = int(pid_file.read_text())
    for _ in range(200):  # the background sleep was in the group: it goes too
        if process_gone(child):
            break
        await asyncio.sleep(0.01)
    assert process_gone(child)


async def test_a_call_cannot_ask_for_more_than_the_setting(tmp_path: Path) -> None:
    registry = ToolRegistry([shell_tool(cwd=tmp_path, timeout_s=0.3)])
    outcome = await registry.dispatch("shell", {"command": "sleep 30", "timeout_s": 999}, None)
    assert outcome.reason == "timeout" and "after 0.3s" in outcome.text
    refused = await registry.dispatch("shell", {"command": "true", "timeout_s": 0}, None)
    assert not refused.ok and "timeout_s must be" in refused.text


async def test_large_output_keeps_head_and_tail(tmp_path: Path) -> None:
    command = "seq 1 200000"
    result = await run_shell(command, cwd=tmp_path, timeout_s=30, output_cap_chars=1000)
    assert result.returncode == 0 and not result.timed_out
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.endswith("199999\n200000\n")
    assert "characters omitted" in result.output
    assert len(result.output) < 1100


def test_capped_text_counts_and_decodes_split_characters() -> None:
    capped = CappedText(10)
    data = "é" * 3 + "x" * 20 + "ü" * 3
    raw = data.encode()
    for index in range(len(raw)):  # one byte at a time: characters split across chunks
        capped.feed(raw[index : index + 1])
    capped.feed(b"", final=True)
    assert capped.total == len(data)
    assert capped.text() == "éééxx\n[... 16 characters omitted ...]\nxxüüü"
    small = CappedText(100)
    small.feed(b"short")
    assert small.text() == "short"
