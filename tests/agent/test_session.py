"""Whole turns of the session loop with a ScriptedProvider, real pads and a real store."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from scratchpad.agent import Session, SessionEvent
from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError
from scratchpad.llm import Message, ScriptedProvider, TextBlock, ToolCall, ToolResultBlock
from scratchpad.llm.messages import ToolUseBlock
from scratchpad.observations import ObservationStore
from scratchpad.runtime.cell import Cell
from scratchpad.runtime.manager import ScratchpadManager


def run_code(code: str, name: str = "main") -> ToolCall:
    return ToolCall("scratchpad", {"action": "exec", "name": name, "code": code})


def results_of(message: Message) -> list[ToolResultBlock]:
    return [block for block in message.content if isinstance(block, ToolResultBlock)]


def result_text(block: ToolResultBlock) -> str:
    return "\n".join(part.text for part in block.content if isinstance(part, TextBlock))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ObservationStore]:
    opened = ObservationStore(tmp_path / "obs.db", settings=Settings(home=tmp_path))
    yield opened
    opened.close()


def session_for(
    manager: ScratchpadManager, store: ObservationStore, turns: list[Any], **kwargs: Any
) -> tuple[Session, ScriptedProvider]:
    provider = ScriptedProvider(turns)
    return Session(
        provider=provider, manager=manager, store=store, system="Be exact.", **kwargs
    ), provider


async def test_a_turn_that_computes(manager: ScratchpadManager, store: ObservationStore) -> None:
    session, provider = session_for(manager, store, [[run_code("x = 6 * 7\nx")], "It is 42."])
    assert await session.turn("What is 6 times 7?") == "It is 42."
    assert [m.role for m in session.history] == ["user", "assistant", "user", "assistant"]
    assert result_text(results_of(session.history[2])[0]) == "[result]\n42"
    second_request = provider.requests[1]
    assert second_request["system"].startswith("Be exact.")
    assert [t.name for t in second_request["tools"]] == ["scratchpad", "read_image"]


async def test_an_error_and_its_recovery(
    manager: ScratchpadManager, store: ObservationStore
) -> None:
    session, _ = session_for(
        manager, store, [[run_code("1/0")], [run_code("1/1")], "Recovered: 1.0."]
    )
    assert await session.turn("divide") == "Recovered: 1.0."
    error, fixed = results_of(session.history[2])[0], results_of(session.history[4])[0]
    assert error.is_error and "ZeroDivisionError" in result_text(error)
    assert not fixed.is_error and result_text(fixed) == "[result]\n1.0"


async def test_large_output_is_offloaded_then_grepped(
    manager: ScratchpadManager, store: ObservationStore
) -> None:
    code = "for i in range(30000):\n    print(f'row {i}')\nprint('ERROR: disk full')"
    grep = ToolCall(
        "read_observation",
        {"observation_id": "{{step1.observation_id}}", "mode": "grep", "pattern": "ERROR"},
    )
    session, provider = session_for(manager, store, [[run_code(code)], [grep], "Disk full."])
    assert await session.turn("run the job") == "Disk full."
    summary = result_text(results_of(session.history[2])[0])
    assert "large output saved as observation" in summary and len(summary) < 2500
    assert "read_observation" in [t.name for t in provider.requests[1]["tools"]]
    found = result_text(results_of(session.history[4])[0])
    assert "30002:ERROR: disk full" in found  # line 1 is the "[output]" label


async def test_a_damaged_call_is_not_run(
    manager: ScratchpadManager, store: ObservationStore
) -> None:
    damaged = ToolCall("scratchpad", {}, parse_error="unexpected end of JSON")
    session, _ = session_for(manager, store, [[damaged], "Sorry."])
    assert await session.turn("go") == "Sorry."
    result = results_of(session.history[2])[0]
    assert result.is_error and "Send the call again with complete, valid JSON" in result_text(
        result
    )
    assert manager.names() == []  # nothing was started


async def test_the_round_cap_forces_a_wrap_up(
    manager: ScratchpadManager, store: ObservationStore
) -> None:
    capped = manager.settings.model_copy(update={"max_tool_rounds": 2})
    session, provider = session_for(
        manager, store, [[run_code("1")], [run_code("2")], [run_code("3")]], settings=capped
    )
    events: list[str] = []
    session.subscribe(lambda event: events.append(event.kind))
    assert await session.turn("loop") == ""
    assert "cap_exhausted" in events
    wrap_up = provider.requests[2]
    assert wrap_up["tool_choice"] == {"type": "none"}  # tools declared, calling them not allowed
    assert [t.name for t in wrap_up["tools"]] == ["scratchpad", "read_image"]
    assert "tool-round cap (2) is reached" in session.history[4].content[-1].text  # type: ignore[union-attr]
    unrun = results_of(session.history[-2])
    assert unrun and "Not run: round cap reached" in result_text(unrun[0])
    assert session.history[-1] == Message.assistant("(The tool-round cap was reached.)")


async def test_a_failure_streak_gets_a_hint_then_a_stop(
    manager: ScratchpadManager, store: ObservationStore
) -> None:
    failing = [[run_code("1/0")] for _ in range(6)]
    session, _ = session_for(manager, store, [*failing, "Giving up."])
    assert await session.turn("try") == "Giving up."
    texts = [result_text(results_of(session.history[i])[0]) for i in range(2, 14, 2)]
    assert "[hint]" not in texts[0]
    assert "failed 2 times in a row" in texts[1]
    assert "failed 5 times in a row: stop retrying" in texts[4]
    assert "is not run again this turn" in texts[5]


async def test_events_and_observers(manager: ScratchpadManager, store: ObservationStore) -> None:
    seen: list[tuple[str, str]] = []

    class Observer:
        def before_cell(self, pad: str, cell: Cell) -> None:
            seen.append(("before", cell.code))

        def after_cell(self, pad: str, cell: Cell) -> None:
            seen.append(("after", cell.status))
            raise RuntimeError("observers may fail")

    provider = ScriptedProvider([[run_code("progress('half way')\n2")], "Two."])
    session = Session(provider=provider, manager=manager, store=store, observers=[Observer()])
    events: list[SessionEvent] = []

    def broken(event: SessionEvent) -> None:
        raise ZeroDivisionError("a broken subscriber must not break the turn")

    session.subscribe(broken)
    async for event in session.turn_stream("two?"):
        events.append(event)
    kinds = [event.kind for event in events]
    assert kinds[:2] == ["tool_call", "scratchpad_call"]
    assert "tool_progress" in kinds and "scratchpad_result" in kinds
    assert kinds[-2:] == ["text_delta", "turn_end"]
    assert events[-1].data["text"] == "Two."
    assert seen == [("before", "progress('half way')\n2"), ("after", "ok")]


async def test_history_is_restored_for_the_same_session_id(
    manager: ScratchpadManager, store: ObservationStore
) -> None:
    first, _ = session_for(manager, store, ["Hello."], session_id="chat-1")
    await first.turn("hi")
    second, provider = session_for(manager, store, ["Again."], session_id="chat-1")
    assert [m.text for m in second.history] == ["hi", "Hello."]
    await second.turn("and again")
    assert [m.text for m in provider.requests[0]["messages"]] == ["hi", "Hello.", "and again"]


async def test_scrub_hook_runs_on_results_and_logs(
    manager: ScratchpadManager, store: ObservationStore
) -> None:
    session, _ = session_for(
        manager,
        store,
        [[run_code("print('token=SECRET')")], "Done."],
        scrub=lambda text: text.replace("SECRET", "[redacted]"),
        session_id="scrubbed",
    )
    await session.turn("show")
    assert result_text(results_of(session.history[2])[0]) == "[output]\ntoken=[redacted]"
    assert session.files is not None
    log_lines = session.files.log_path.read_text().splitlines()
    records = [json.loads(line) for line in log_lines]
    assert [r["kind"] for r in records] == ["tool_call", "tool_result"]
    assert "SECRET" not in session.files.log_path.read_text()
    assert records[1]["result"] == "[output]\ntoken=[redacted]"


async def test_the_saved_history_is_scrubbed_too(
    manager: ScratchpadManager, store: ObservationStore
) -> None:
    """A secret the user typed, or the model wrote in a call or its answer, reaches the
    history file only as its label (the model's context in memory keeps its words)."""
    call = ToolCall(
        "scratchpad",
        {"action": "exec", "name": "main", "code": "# SECRET", "description": "SECRET"},
    )
    session, _ = session_for(
        manager,
        store,
        [[call], "It is SECRET."],
        scrub=lambda text: text.replace("SECRET", "[redacted]"),
        session_id="history-scrubbed",
    )
    assert await session.turn("the key is SECRET") == "It is SECRET."
    assert session.files is not None
    saved = session.files.history_path.read_text()
    assert "SECRET" not in saved
    assert saved.count("[redacted]") == 4
    assert session.history[0].text == "the key is SECRET"


async def test_an_interrupted_history_is_repaired(
    manager: ScratchpadManager, store: ObservationStore
) -> None:
    session, provider = session_for(manager, store, ["Fine."])
    session.history = [
        Message.user("old"),
        Message.assistant(ToolUseBlock("call_9", "scratchpad", {})),
    ]
    events: list[str] = []
    session.subscribe(lambda event: events.append(event.kind))
    assert await session.turn("new") == "Fine."
    assert events[0] == "history_repair"
    sent = provider.requests[0]["messages"]
    assert [m.role for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert "interrupted" in result_text(results_of(sent[2])[0])


async def test_empty_messages_are_refused(
    manager: ScratchpadManager, store: ObservationStore
) -> None:

    session, _ = session_for(manager, store, [])
    with pytest.raises(InvalidInputError, match="non-empty user message"):
        await session.turn("   ")
