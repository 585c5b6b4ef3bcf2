"""The echo and shell tools, through a real registry and real subprocesses (the shell's
confinement is tried the way a hostile model would in tests/runtime/test_agent_confinement.py)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.runtime.procgroup import CappedText
from scratchpad.scrub import register, scrubber
from scratchpad.tools.echo_tool import echo_tool
from scratchpad.tools.registry import ToolRegistry
from scratchpad.tools.shell_tool import ShellOptions, ShellResult, run_shell, shell_tool
from tests.runtime.attacks import gone, processes_with

_tokens = itertools.count(1)


def token() -> str:
    """Seconds for a ``sleep`` that only this test starts (found again by its command line)."""
    return f"{60 + next(_tokens)}.{os.getpid()}"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def options(ws: Path, timeout_s: float = 30.0, output_cap_chars: int = 1000) -> ShellOptions:
    settings = Settings(home=ws.parent / "home")
    return ShellOptions(ws, settings, timeout_s=timeout_s, output_cap_chars=output_cap_chars)


async def started(sleep: str, within_s: float = 10.0) -> None:
    """Wait until the ``sleep`` of ``sleep`` seconds runs."""
    deadline = time.monotonic() + within_s
    while not processes_with(f"sleep\0{sleep}") and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    assert processes_with(f"sleep\0{sleep}"), f"sleep {sleep} did not start"


async def test_echo_gives_its_text_back() -> None:
    registry = ToolRegistry([echo_tool()])
    outcome = await registry.dispatch("echo", {"text": "héllo\nworld"}, None)
    assert outcome.ok and outcome.text == "héllo\nworld"
    refused = await registry.dispatch("echo", {"text": 5}, None)
    assert not refused.ok and "must be of type string" in refused.text


async def test_shell_reports_output_and_exit_code(ws: Path) -> None:
    registry = ToolRegistry([shell_tool(options(ws))])
    ok = await registry.dispatch("shell", {"command": "pwd; echo out; echo err >&2"}, None)
    assert ok.ok and ok.text == f"{ws}\nout\nerr\n[exit code 0]"
    failed = await registry.dispatch("shell", {"command": "exit 7"}, None)
    assert not failed.ok and failed.reason == "exit_code"
    assert failed.text == "(no output)\n[exit code 7]"


async def test_shell_stdin_is_closed(ws: Path) -> None:
    registry = ToolRegistry([shell_tool(options(ws, timeout_s=10))])
    outcome = await registry.dispatch("shell", {"command": "cat; echo after"}, None)
    assert outcome.text == "after\n[exit code 0]"  # cat saw EOF at once


async def test_a_timeout_stops_everything_it_started(ws: Path) -> None:
    sleep = token()
    command = f"sleep {sleep} & echo started; wait"
    registry = ToolRegistry([shell_tool(options(ws))])
    outcome = await registry.dispatch("shell", {"command": command, "timeout_s": 0.5}, None)
    assert not outcome.ok and outcome.reason == "timeout"
    assert outcome.text.startswith("started\n")  # what came before the timeout is kept
    assert "[timed out after 0.5s; stopped, exit code" in outcome.text
    assert await gone(sleep) == []  # the background sleep went with it


async def test_a_background_child_holding_stdout_is_stopped_when_sh_exits(ws: Path) -> None:
    sleep = token()
    registry = ToolRegistry([shell_tool(options(ws, timeout_s=20))])
    outcome = await registry.dispatch("shell", {"command": f"sleep {sleep} & echo started"}, None)
    assert outcome.ok and outcome.text == "started\n[exit code 0]"  # not the timeout
    assert await gone(sleep) == []


async def test_a_detached_background_child_is_stopped_too(ws: Path) -> None:
    sleep = token()
    command = f"(sleep {sleep} >/dev/null 2>&1 &); echo bg"
    result = await run_shell(command, options(ws), timeout_s=20)
    assert result == ShellResult("bg\n", 0, timed_out=False)
    assert await gone(sleep) == []


async def test_a_cancelled_call_stops_the_command(ws: Path) -> None:
    sleep = token()
    call = asyncio.ensure_future(run_shell(f"exec sleep {sleep}", options(ws), timeout_s=60))
    await started(sleep)
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await call
    assert call.cancelled()
    assert await gone(sleep) == []


async def test_a_command_past_the_pads_memory_limit_is_stopped_saying_so(ws: Path) -> None:
    """Three children of 60 MiB under a 100 MiB limit: the tree is over, each one is not."""
    hold = "import time; b = bytearray(60 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(60)"
    settings = Settings(home=ws.parent / "home", pad_memory_mb=100)
    command = f'for i in 1 2 3; do python3 -c "{hold}" & done; wait'
    result = await run_shell(command, ShellOptions(ws, settings), timeout_s=30)
    assert not result.timed_out, result
    assert "[stopped: out of memory: the pad used" in result.output
    assert "of its 100 MiB limit]" in result.output


async def test_a_call_cannot_ask_for_more_than_the_setting(ws: Path) -> None:
    registry = ToolRegistry([shell_tool(options(ws, timeout_s=0.3))])
    outcome = await registry.dispatch("shell", {"command": "sleep 30", "timeout_s": 999}, None)
    assert outcome.reason == "timeout" and "after 0.3s" in outcome.text
    refused = await registry.dispatch("shell", {"command": "true", "timeout_s": 0}, None)
    assert not refused.ok and "timeout_s must be" in refused.text


async def test_large_output_keeps_head_and_tail(ws: Path) -> None:
    result = await run_shell("seq 1 200000", options(ws), timeout_s=30)
    assert result.returncode == 0 and not result.timed_out
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.endswith("199999\n200000\n")
    assert "characters omitted" in result.output
    assert len(result.output) < 1100


async def test_a_secret_cut_by_the_cap_is_scrubbed_before_the_cut(ws: Path) -> None:
    """Scrubbed as it streams, then capped: no piece of a secret survives the cut."""
    secret = "cut-in-two-0123456789abcdef"
    register([(secret, "DS_CUT")])
    (ws / "out.txt").write_text("x" * 40 + secret + "y" * 200)
    result = await run_shell("cat out.txt", options(ws, output_cap_chars=100), timeout_s=30)
    assert "characters omitted" in result.output
    assert "cut-in" not in result.output and "abcdef" not in result.output
    assert result.output.startswith("x" * 40 + "[DS_CUT]")


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


def test_capped_text_filters_before_it_caps() -> None:
    register([("straddling-secret-value", "DS_STRADDLE")])
    capped = CappedText(40, scrubber().stream())  # unfiltered, its head would end "ab" + 18
    data = ("ab" + "straddling-secret-value" + "z" * 80).encode()  # characters of the secret
    for index in range(0, len(data), 5):
        capped.feed(data[index : index + 5])
    capped.feed(b"", final=True)
    assert capped.text().startswith("ab[DS_STRADDLE]")
