"""The echo and shell tools, through a real registry and real subprocesses."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from scratchpad.runtime.procgroup import CappedText
from scratchpad.tools.echo_tool import echo_tool
from scratchpad.tools.registry import ToolRegistry
from scratchpad.tools.shell_tool import ShellResult, run_shell, shell_tool
from tests.process_helpers import process_gone, read_pid


async def gone_soon(pid: int, within_s: float = 3.0) -> bool:
    """Whether ``pid`` is gone (or a zombie) within ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while not process_gone(pid) and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    return process_gone(pid)


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
    assert await gone_soon(int(pid_file.read_text()))  # the background sleep was in the group


async def test_a_background_child_holding_stdout_is_stopped_when_sh_exits(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "child.pid"
    command = f"sleep 37 & echo $! > {pid_file}; echo started"
    registry = ToolRegistry([shell_tool(cwd=tmp_path, timeout_s=20)])
    began = time.monotonic()
    outcome = await registry.dispatch("shell", {"command": command}, None)
    assert time.monotonic() - began < 10  # not the timeout: sh had exited
    assert outcome.ok and outcome.text == "started\n[exit code 0]"
    assert await gone_soon(int(pid_file.read_text()))


async def test_a_detached_background_child_is_stopped_too(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    command = f"(sleep 38 >/dev/null 2>&1 & echo $! > {pid_file}); echo bg"
    result = await run_shell(command, cwd=tmp_path, timeout_s=20, output_cap_chars=1000)
    assert result == ShellResult("bg\n", 0, timed_out=False)
    assert await gone_soon(int(pid_file.read_text()))


async def test_a_cancelled_call_stops_the_command(tmp_path: Path) -> None:
    pid_file = tmp_path / "sh.pid"
    command = f"echo $$ > {pid_file}; exec sleep 39"
    call = asyncio.ensure_future(
        run_shell(command, cwd=tmp_path, timeout_s=60, output_cap_chars=1000)
    )
    pid = await asyncio.wait_for(read_pid(pid_file), 10)
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await call
    assert call.cancelled()
    assert await gone_soon(pid)


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
