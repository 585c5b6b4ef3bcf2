"""builtin_registry: which built-in tools each caller gets, always in the same order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError
from scratchpad.observations import ObservationStore
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools import ShellOptions, ToolDef, builtin_registry

SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


async def nothing(context: Any, tool_input: dict[str, Any]) -> str:
    return "nothing"


def extra(name: str, prompt: str | None = None) -> ToolDef:
    return ToolDef(name, f"the {name} tool", SCHEMA, nothing, prompt=prompt)


@pytest.fixture
def parts(tmp_path: Path) -> tuple[ScratchpadManager, ObservationStore]:
    settings = Settings(home=tmp_path / "home")
    store = ObservationStore(tmp_path / "obs.db", settings=settings)
    return ScratchpadManager(workspace=tmp_path, settings=settings), store


def test_only_read_image_without_a_manager_or_a_store() -> None:
    assert builtin_registry().names() == ["read_image"]
    assert builtin_registry(images=False).names() == []


def test_every_tool_in_its_fixed_order(
    parts: tuple[ScratchpadManager, ObservationStore], tmp_path: Path
) -> None:
    manager, store = parts
    registry = builtin_registry(
        manager,
        store,
        echo=True,
        shell=ShellOptions(tmp_path, manager.settings, timeout_s=5, output_cap_chars=100),
        extra=[extra("second"), extra("first")],
    )
    assert registry.names() == [
        "echo",
        "scratchpad",
        "read_observation",
        "read_image",
        "shell",
        "second",
        "first",
    ]
    shell = registry.get("shell")
    assert shell is not None and str(tmp_path) in shell.description
    assert "at most 100 characters" in shell.description


def test_each_caller_keeps_what_it_offered(
    parts: tuple[ScratchpadManager, ObservationStore],
) -> None:
    manager, store = parts
    session = builtin_registry(manager, store)
    mcp = builtin_registry(manager, store, images=False)
    shell = ShellOptions(Path("ws"), manager.settings)
    agent = builtin_registry(manager, store, echo=True, images=False, shell=shell)
    assert session.names() == ["scratchpad", "read_observation", "read_image"]
    assert mcp.names() == ["scratchpad", "read_observation"]
    assert agent.names() == ["echo", "scratchpad", "read_observation", "shell"]


def test_extra_tools_add_their_prompt_fragments_after_the_built_in_ones(
    parts: tuple[ScratchpadManager, ObservationStore],
) -> None:
    manager, _ = parts
    registry = builtin_registry(manager, extra=[extra("verdict", prompt="Say how it went.")])
    fragments = registry.prompt_fragments()
    assert fragments[-1] == "Say how it went."
    assert len(fragments) == 1 + len(builtin_registry(manager).prompt_fragments())


def test_an_extra_tool_with_a_taken_name_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="'read_image' is taken"):
        builtin_registry(extra=[extra("read_image")])
    with pytest.raises(InvalidInputError, match="'twice' is taken"):
        builtin_registry(extra=[extra("twice"), extra("twice")])
