"""``Session(persist=False)`` keeps nothing on disk; ``persist=True`` (the default) saves the
history and the episodic log under ``<home>/sessions/`` as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scratchpad.agent import Session
from scratchpad.errors import InvalidInputError
from scratchpad.llm import ScriptedProvider, TextBlock, ToolCall, ToolResultBlock
from scratchpad.llm.scripted import Turn
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools import builtin_registry

ECHO_TURNS: list[Turn] = [
    [ToolCall("echo", {"text": "one"}), ToolCall("echo", {"text": "two"})],
    "Echoed.",
]


def files_under(root: Path) -> set[Path]:
    return {path.relative_to(root) for path in root.rglob("*")}


def echo_session(manager: ScratchpadManager, **kwargs: Any) -> Session:
    return Session(
        provider=ScriptedProvider(ECHO_TURNS),
        manager=manager,
        registry=builtin_registry(echo=True, images=False),
        **kwargs,
    )


async def test_a_session_that_keeps_nothing_writes_no_file(
    manager: ScratchpadManager, tmp_path: Path
) -> None:
    session = echo_session(manager, persist=False)
    before = files_under(tmp_path)
    kinds: list[str] = []
    session.subscribe(lambda event: kinds.append(event.kind))
    assert await session.turn("echo twice") == "Echoed."
    assert files_under(tmp_path) == before
    assert session.session_id is None and session.files is None
    assert kinds.count("tool_result") == 2 and kinds[-1] == "turn_end"
    assert [m.role for m in session.history] == ["user", "assistant", "user", "assistant"]


async def test_a_session_that_keeps_nothing_runs_pads_and_scrubs_without_sessions_dir(
    manager: ScratchpadManager, tmp_path: Path
) -> None:
    call = ToolCall("scratchpad", {"action": "exec", "name": "main", "code": "print('SECRET')"})
    session = Session(
        provider=ScriptedProvider([[call], "Printed."]),
        manager=manager,
        persist=False,
        scrub=lambda text: text.replace("SECRET", "[redacted]"),
    )
    assert await session.turn("print it") == "Printed."
    [result] = session.history[2].content
    assert isinstance(result, ToolResultBlock)
    assert result.content == (TextBlock("[output]\n[redacted]"),)
    assert not (session.settings.home / "sessions").exists()
    assert not [path for path in tmp_path.rglob("*.jsonl") if "sessions" in path.parts]


async def test_nothing_is_restored_without_persistence(manager: ScratchpadManager) -> None:
    first = echo_session(manager, persist=False)
    await first.turn("echo twice")
    assert echo_session(manager, persist=False).history == []


def test_a_session_id_needs_persistence(manager: ScratchpadManager) -> None:
    with pytest.raises(InvalidInputError, match="persist=False"):
        echo_session(manager, persist=False, session_id="chat-1")


async def test_persisting_stays_the_default(manager: ScratchpadManager) -> None:
    session = echo_session(manager)
    assert session.session_id is not None and len(session.session_id) == 16
    await session.turn("echo twice")
    directory = session.settings.home / "sessions"
    assert sorted(p.name for p in directory.iterdir()) == [
        f"{session.session_id}.json",
        f"{session.session_id}.jsonl",
    ]
    log = [json.loads(line) for line in (directory / f"{session.session_id}.jsonl").open()]
    assert [r["kind"] for r in log] == ["tool_call", "tool_result"] * 2
    again = echo_session(manager, session_id=session.session_id)
    assert [m.role for m in again.history] == [m.role for m in session.history]
