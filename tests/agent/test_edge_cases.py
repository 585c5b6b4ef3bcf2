"""Edge cases of the session loop and tools: empty replies, cut-off calls, failing cells,
generator handlers, scrubbing before storage, relative image paths, abandoned streams."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from scratchpad.agent import Session
from scratchpad.config import Settings
from scratchpad.llm import Message, Response, ScriptedProvider, TextBlock, ToolCall
from scratchpad.llm.messages import ToolUseBlock
from scratchpad.observations import ObservationStore
from scratchpad.runtime.cell import Cell
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools import ToolDef, ToolRegistry, ToolSessionContext, read_image_tool
from tests.agent.test_session import result_text, results_of
from tests.tools.test_builtin_tools import PNG


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ObservationStore]:
    opened = ObservationStore(tmp_path / "obs.db", settings=Settings(home=tmp_path))
    yield opened
    opened.close()


async def test_an_empty_reply_keeps_the_history_valid(
    manager: ScratchpadManager, store: ObservationStore
) -> None:
    session = Session(provider=ScriptedProvider([Response(())]), manager=manager, store=store)
    assert await session.turn("hello?") == ""
    assert session.history[-1] == Message.assistant("(empty reply)")


async def test_a_call_cut_off_at_max_tokens_is_not_run(
    manager: ScratchpadManager, store: ObservationStore
) -> None:
    cut = ToolCall(
        "scratchpad", {"action": "exec", "name": "main", "code": "import os"}, "c1", repaired=True
    )
    reply = Response(
        (ToolUseBlock("c1", "scratchpad", cut.input),), (cut,), stop_reason="max_tokens"
    )
    session = Session(provider=ScriptedProvider([reply, "ok"]), manager=manager, store=store)
    await session.turn("go")
    assert "cut off at the output limit" in result_text(results_of(session.history[2])[0])
    assert manager.names() == []


async def test_observers_see_the_end_of_a_cell_that_could_not_run(
    manager: ScratchpadManager,
) -> None:
    seen: list[str] = []

    class Observer:
        def before_cell(self, pad: str, cell: Cell) -> None:
            seen.append("before")

        def after_cell(self, pad: str, cell: Cell) -> None:
            seen.append(f"after:{cell.status}")

    first = ToolCall("scratchpad", {"action": "exec", "name": "main", "code": "1", "cell_id": "c"})
    reused = ToolCall("scratchpad", {"action": "exec", "name": "main", "code": "2", "cell_id": "c"})
    session = Session(
        provider=ScriptedProvider([[first], [reused], "done"]),
        manager=manager,
        observers=[Observer()],
    )
    await session.turn("go")
    assert seen == ["before", "after:ok", "before", "after:error"]  # the pad refused the id
    assert "already names a cell with other code" in result_text(results_of(session.history[4])[0])


async def test_a_generator_handler_may_end_with_text() -> None:
    async def handler(context: Any, tool_input: dict[str, Any]) -> AsyncIterator[str]:
        yield "working"
        yield "final answer"

    class Context:
        def __init__(self) -> None:
            self.messages: list[str] = []

        def progress(self, message: str) -> None:
            self.messages.append(message)

    context = Context()
    registry = ToolRegistry([ToolDef("gen", "g", {"type": "object"}, handler)])
    outcome = await registry.dispatch("gen", {}, context)
    assert outcome.text == "final answer" and context.messages == ["working"]


async def test_large_output_is_scrubbed_before_it_is_stored(
    manager: ScratchpadManager, store: ObservationStore
) -> None:
    code = "print('token=SECRET')\nfor i in range(3000):\n    print(i)"
    call = ToolCall("scratchpad", {"action": "exec", "name": "main", "code": code})
    session = Session(
        provider=ScriptedProvider([[call], "ok"]),
        manager=manager,
        store=store,
        scrub=lambda text: text.replace("SECRET", "***"),
    )
    await session.turn("go")
    stored = store.list_all()
    assert len(stored) == 1
    content = store.get(stored[0].id).content
    assert isinstance(content, str) and "token=***" in content and "SECRET" not in content


async def test_read_image_paths_are_relative_to_the_workspace(
    manager: ScratchpadManager, workspace: Path
) -> None:
    (workspace / "plot.png").write_bytes(PNG)
    context = ToolSessionContext(manager=manager)
    outcome = await ToolRegistry([read_image_tool()]).dispatch(
        "read_image", {"path": "plot.png"}, context
    )
    assert outcome.ok, outcome.text
    assert isinstance(outcome.blocks()[0], TextBlock)


async def test_an_abandoned_stream_still_saves_the_history(
    manager: ScratchpadManager, store: ObservationStore
) -> None:
    call = ToolCall(
        "scratchpad", {"action": "exec", "name": "main", "code": "import time\ntime.sleep(5)"}
    )
    session = Session(
        provider=ScriptedProvider([[call], "late"]),
        manager=manager,
        store=store,
        session_id="abandoned",
    )
    stream = session.turn_stream("wait")
    async for event in stream:
        if event.kind == "scratchpad_call":
            break
    await stream.aclose()
    assert session.files is not None and session.files.history_path.exists()
    assert not any(pad.busy for pad in map(manager.get, manager.names()))


def test_session_ids_are_checked(manager: ScratchpadManager) -> None:
    from scratchpad.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=r"invalid session id '\.\./x'"):
        Session(provider=ScriptedProvider([]), manager=manager, session_id="../x")


class SilentProvider(ScriptedProvider):
    """A provider whose stream ends without its final reply (a broken connection)."""

    async def stream(self, **kwargs: Any) -> AsyncIterator[Any]:
        for _ in ():
            yield


async def test_a_provider_that_ends_without_a_reply_is_an_llm_error(
    manager: ScratchpadManager,
) -> None:
    from scratchpad.errors import LLMError

    session = Session(provider=SilentProvider([]), manager=manager)
    with pytest.raises(LLMError, match="ended without a reply; try the turn again"):
        await session.turn("hello")
