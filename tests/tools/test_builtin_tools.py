"""The built-in tools against real pads and a real observation store."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from scratchpad.config import Settings
from scratchpad.llm.messages import ImageBlock, TextBlock
from scratchpad.observations import ObservationStore
from scratchpad.runtime.cell import Cell
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools import (
    ToolRegistry,
    ToolSessionContext,
    read_image_tool,
    read_observation_tool,
    scratchpad_tool,
)
from scratchpad.tools.cell_result import NO_OUTPUT

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cf000000030101005cc6a2f70000000049454e44ae426082"
)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.cells: list[tuple[str, str, str]] = []

    def on_event(self, name: str, data: dict[str, Any]) -> None:
        self.events.append((name, data))

    def before_cell(self, pad: str, cell: Cell) -> None:
        self.cells.append(("before", pad, cell.code))

    def after_cell(self, pad: str, cell: Cell) -> None:
        self.cells.append(("after", pad, cell.status))


@pytest.fixture
async def setup(
    manager: ScratchpadManager, tmp_path: Path
) -> AsyncIterator[tuple[ToolRegistry, ToolSessionContext, Recorder]]:
    store = ObservationStore(tmp_path / "obs.db", settings=Settings(home=tmp_path))
    recorder = Recorder()
    context = ToolSessionContext(
        manager=manager,
        store=store,
        turn_id="turn-1",
        step_num=1,
        observers=[recorder],
        on_event=recorder.on_event,
    )
    registry = ToolRegistry([scratchpad_tool(manager), read_observation_tool(), read_image_tool()])
    yield registry, context, recorder
    store.close()


async def run(registry: ToolRegistry, context: ToolSessionContext, **tool_input: Any) -> Any:
    return await registry.dispatch("scratchpad", tool_input, context)


async def test_exec_keeps_state_and_reports_sections(setup: Any) -> None:
    registry, context, recorder = setup
    first = await run(registry, context, action="exec", name="main", code="x = 41")
    assert first.text == NO_OUTPUT
    second = await run(
        registry,
        context,
        action="exec",
        name="main",
        code="print('hi')\nx + 1",
        one_line_description="add",
    )
    assert second.ok
    assert second.text == "[output]\nhi\n\n[result]\n42"
    failed = await run(registry, context, action="exec", name="main", code="1/0")
    assert not failed.ok and failed.reason == "error"
    assert failed.text.startswith("[error]\nTraceback") and "ZeroDivisionError" in failed.text
    assert [e for e, _ in recorder.events] == ["scratchpad_call", "scratchpad_result"] * 3
    assert recorder.cells[2:4] == [
        ("before", "main", "print('hi')\nx + 1"),
        ("after", "main", "ok"),
    ]


async def test_empty_code_asks_for_the_call_again(setup: Any) -> None:
    registry, context, recorder = setup
    outcome = await run(registry, context, action="exec", name="main", code="  ")
    assert outcome.reason == "empty_code" and "probably cut off" in outcome.text
    assert recorder.events == [("scratchpad_empty_code", {"pad": "main"})]


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"timeout_s": math.nan}, "timeout_s must be a number of seconds > 0, not nan"),
        ({"timeout_s": math.inf}, "timeout_s must be a number of seconds > 0, not inf"),
        ({"timeout_s": -1}, "timeout_s must be a number of seconds > 0, not -1"),
        (
            {"estimated_execution_time_seconds": math.nan},
            "estimated_execution_time_seconds must be a number of seconds >= 0 (0: no "
            "estimate), not nan",
        ),
        ({"estimated_execution_time_seconds": -4}, "not -4"),
    ],
)
async def test_meaningless_seconds_are_refused_before_a_pad_starts_or_installs(
    setup: Any, manager: ScratchpadManager, wheel: Path, given: dict[str, float], words: str
) -> None:
    """A model's JSON may hold NaN or Infinity (Python's json reads them)."""
    registry, context, _ = setup
    call = {"action": "exec", "name": "main", "code": "1", "packages": [str(wheel)], **given}
    outcome = await run(registry, context, **call)
    assert not outcome.ok and words in outcome.text, outcome.text
    assert manager.names() == [] and manager.names_on_disk() == []


async def test_a_second_pad_name_is_questioned_once(setup: Any) -> None:
    registry, context, _ = setup
    await run(registry, context, action="exec", name="main", code="a = 1")
    asked = await run(registry, context, action="exec", name="mian", code="a")
    assert asked.reason == "confirm_new_scratchpad" and "'main'" in asked.text
    again = await run(registry, context, action="exec", name="mian", code="2")
    assert again.text == "[result]\n2"
    confirmed = await run(
        registry, context, action="exec", name="other", code="3", confirm_new_scratchpad=True
    )
    assert confirmed.text == "[result]\n3"


async def test_large_output_is_offloaded_and_readable(setup: Any) -> None:
    registry, context, _ = setup
    code = "for i in range(20000):\n    print(f'line {i}')\nprint('ERROR at the end')"
    outcome = await run(registry, context, action="exec", name="main", code=code)
    assert "large output saved as observation" in outcome.text
    assert len(outcome.text) < 2500
    entry = context.store.list_for_turn("turn-1")[0]
    assert [t["name"] for t in registry.dump(context)] == [
        "scratchpad",
        "read_observation",
        "read_image",
    ]
    found = await registry.dispatch(
        "read_observation",
        {"observation_id": entry.id, "mode": "grep", "pattern": "ERROR"},
        context,
    )
    assert found.ok and "20002:ERROR at the end" in found.text
    none = {"n": 0, "start": 0, "end": 0, "pattern": "", "context": 0, "max_matches": 0}
    strict = {"observation_id": entry.id, "mode": "lines", **none}  # a strict client's "none"
    lines = await registry.dispatch("read_observation", strict, context)
    assert lines.ok and "line 0" in lines.text, lines.text


async def test_read_observation_is_hidden_without_observations(setup: Any) -> None:
    registry, context, _ = setup
    assert "read_observation" not in [t["name"] for t in registry.dump(context)]
    other_turn = context.store.put("x" * 10, turn_id="turn-0")
    refused = await registry.dispatch("read_observation", {"observation_id": other_turn}, context)
    assert not refused.ok and "another turn" in refused.text


async def test_plots_come_back_as_image_blocks(setup: Any) -> None:
    pytest.importorskip("matplotlib")
    registry, context, _ = setup
    outcome = await run(
        registry,
        context,
        action="exec",
        name="main",
        code="import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()",
    )
    blocks = outcome.blocks()
    assert isinstance(blocks[0], TextBlock)
    assert isinstance(blocks[1], ImageBlock) and blocks[1].media_type == "image/png"
    pad_image = await registry.dispatch("read_image", {"pad": "main"}, context)
    assert isinstance(pad_image.blocks()[1], ImageBlock)


async def test_other_actions(setup: Any, wheel: Path) -> None:
    registry, context, recorder = setup
    await run(
        registry, context, action="exec", name="main", code="v = 1", one_line_description="set"
    )
    assert "set" in (await run(registry, context, action="view", name="main")).text
    assert "## [1] set" in (await run(registry, context, action="dump", name="main")).text
    installed = await run(registry, context, action="install", name="main", packages=[str(wheel)])
    assert installed.ok and "Installed into 'main'" in installed.text
    with_package = await run(
        registry,
        context,
        action="exec",
        name="main",
        code="import sp_demo_pkg\nsp_demo_pkg.VERSION",
    )
    assert with_package.text == "[result]\n'1.0'"
    reset = await run(registry, context, action="reset", name="main")
    assert "reset" in reset.text and ("scratchpad_reset", {"pad": "main"}) in recorder.events
    removed = await run(registry, context, action="remove", name="main")
    assert "removed" in removed.text
    bad = await run(registry, context, action="exec", name="bad\nname", code="1")
    assert not bad.ok and "invalid pad name" in bad.text


async def test_read_image_from_a_file(setup: Any, tmp_path: Path) -> None:
    registry, context, _ = setup
    image = tmp_path / "dot.png"
    image.write_bytes(PNG)
    outcome = await registry.dispatch("read_image", {"path": str(image)}, context)
    assert outcome.blocks()[1] == ImageBlock(
        "image/png", __import__("base64").b64encode(PNG).decode()
    )
    text_file = tmp_path / "notes.txt"
    text_file.write_text("hello")
    refused = await registry.dispatch("read_image", {"path": str(text_file)}, context)
    assert not refused.ok and "not a PNG or JPEG" in refused.text


async def test_a_stopped_cells_advice_names_the_tools_own_fields(
    settings: Settings, tmp_path: Path
) -> None:
    """The model is told to pass ``estimated_execution_time_seconds``, the field it has, not
    the Python API's ``estimated_seconds``; the pad's own history keeps the core's words."""
    quick = settings.model_copy(update={"timeout_slack_s": 0.5})  # an estimate of 0.5: 1 s
    manager = ScratchpadManager(workspace=tmp_path / "work", settings=quick)
    context = ToolSessionContext(manager=manager, turn_id="turn-1", step_num=1)
    registry = ToolRegistry([scratchpad_tool(manager)])
    try:
        call = {"action": "exec", "name": "main", "code": "import time\ntime.sleep(30)"}
        outcome = await run(registry, context, **call, estimated_execution_time_seconds=0.5)
        assert outcome.reason == "timeout"
        assert (
            "pass timeout_s, or a realistic estimated_execution_time_seconds (the limit"
            in outcome.text
        )
        assert "estimated_seconds" not in outcome.text.replace("execution_time_seconds", "")
        kept = manager.get("main").cells[-1].error or ""
        assert "a realistic estimated_seconds" in kept  # the stored cell is not reworded
    finally:
        await manager.close_all()


DISPLAYS = (
    "class Frame:\n"
    "    def _repr_html_(self):\n"
    "        return '<table><tr><td>1</td></tr></table>'\n"
    "    def __repr__(self):\n"
    "        return '   a\\n0  1'\n"
    "class Notes:\n"
    "    def _repr_markdown_(self):\n"
    "        return '**bold** notes'\n"
    "class Picture:\n"
    "    def _repr_png_(self):\n"
    f"        return {PNG!r}\n"
    "display('x')\n"
    "display(Frame(), Notes(), Picture())\n"
    "display('y' * (5 << 20))"  # over half the display cap: dropped, a note says so
)


async def test_what_a_cell_displayed_is_in_the_tool_text(setup: Any) -> None:
    registry, context, _ = setup
    outcome = await run(registry, context, action="exec", name="main", code=DISPLAYS)
    text = outcome.blocks()[0].text
    shown = "[display]\n'x'\n   a\n0  1\n**bold** notes\n[image (image/png), attached]\n"
    assert text.startswith(shown)
    assert "[a display of 5242882 bytes (text/plain) was dropped: over the cap]" in text
    assert [type(block) for block in outcome.blocks()] == [TextBlock, ImageBlock]


async def test_reading_or_resetting_a_pad_that_does_not_exist_makes_none(
    setup: Any, manager: ScratchpadManager
) -> None:
    registry, context, _ = setup
    viewed = await run(registry, context, action="view", name="typo")
    dumped = await run(registry, context, action="dump", name="typo")
    reset = await run(registry, context, action="reset", name="typo")
    for answer in (viewed, dumped, reset):  # as the CLI answers them
        assert not answer.ok and "no pad named 'typo'" in answer.text
    assert "running a cell" in viewed.text and "nothing to reset" in reset.text
    assert not await manager.has_pad("typo")  # a look, or a typo, starts nothing
    assert [pad.name for pad in await manager.list_pads()] == []
