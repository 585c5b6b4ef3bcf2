"""A grep with a pathological pattern never freezes the event loop, and ends within its time
budget with an error that says what to do."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError, ObservationError
from scratchpad.observations import ObservationStore
from scratchpad.observations.pattern import GrepPattern
from scratchpad.observations.reading import can_match_newline
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools.context import ToolSessionContext
from scratchpad.tools.observation_tool import read_observation_tool
from scratchpad.tools.registry import ToolRegistry

BUDGET_S = 1.0
HARD_LIMIT_S = BUDGET_S + 5.0  # the budget, plus room for a loaded machine: never a hang
TEXT = "\n".join(["an ordinary line"] * 50 + ["a" * 24 + "!"] + ["aaa"])
LONGER = "\n".join(["an ordinary line"] * 50 + ["a" * 27 + "!"] + ["aaa"])
CATASTROPHIC = r"(a|a)+$"  # exponential in any backtracking engine, regex included
ISSUE_EXAMPLE = r"(a+)+$"  # froze the server for 3.4 s with Python's re


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ObservationStore]:
    settings = Settings(home=tmp_path / "home", observation_grep_timeout_s=BUDGET_S)
    with ObservationStore(settings=settings) as opened:
        yield opened


async def grep_while_ticking(
    store: ObservationStore, pattern: str, text: str = TEXT
) -> tuple[str, list[float], float]:
    """Run the read_observation tool's grep while another task ticks every 10 ms; the tool's
    answer, the gaps between ticks, and how long the grep took."""
    entry = store.put(text, turn_id="turn")
    context = ToolSessionContext(manager=ScratchpadManager(settings=store.settings), store=store)
    registry = ToolRegistry([read_observation_tool()])
    ticks: list[float] = []
    grep_done = asyncio.Event()

    async def tick() -> None:
        while not grep_done.is_set():
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)  # the ticker's first tick happens before the grep starts
    started = time.monotonic()
    call = {"observation_id": entry, "mode": "grep", "pattern": pattern}
    outcome = await registry.dispatch("read_observation", call, context)
    took = time.monotonic() - started
    ticks.append(time.monotonic())  # the gap to the grep's end counts too
    grep_done.set()
    await ticker
    gaps = [later - earlier for earlier, later in itertools.pairwise(ticks)]
    return outcome.text, gaps, took


async def test_a_catastrophic_grep_ends_with_a_clear_error_and_the_loop_keeps_ticking(
    store: ObservationStore,
) -> None:
    text, gaps, took = await grep_while_ticking(store, CATASTROPHIC)
    assert "too slow" in text and "Simplify it" in text and "nested" in text
    assert BUDGET_S * 0.9 <= took < HARD_LIMIT_S  # it used its budget, and no more
    assert len(gaps) >= 10  # the loop ran all along the grep ...
    assert max(gaps) < BUDGET_S / 2  # ... never frozen for long


async def test_the_pattern_from_the_report_answers_without_freezing_the_loop(
    store: ObservationStore,
) -> None:
    text, gaps, _ = await grep_while_ticking(store, ISSUE_EXAMPLE, LONGER)
    assert "1 matching line" in text and "52:aaa" in text
    assert max(gaps) < BUDGET_S / 2


def test_the_budget_covers_the_whole_grep_not_each_line(store: ObservationStore) -> None:
    lines = "\n".join("a" * 14 + "!" for _ in range(2000))  # ms a line; all of them: seconds
    entry = store.put(lines, turn_id="turn")
    pattern = CATASTROPHIC + r"|\s\s"  # \s could match a newline: searched line by line
    assert can_match_newline(GrepPattern(pattern, BUDGET_S))
    started = time.monotonic()
    with pytest.raises(ObservationError, match=r"grep stopped after 1s.*too slow"):
        store.read(entry, "grep", pattern=pattern)
    assert time.monotonic() - started < HARD_LIMIT_S


def test_grep_patterns_keep_re_syntax_and_errors() -> None:
    with pytest.raises(InvalidInputError, match="invalid regular expression"):
        GrepPattern("(", 1.0)
    with pytest.raises(InvalidInputError, match="grep needs a pattern"):
        GrepPattern("", 1.0)
    assert GrepPattern(r"(?P<word>\w+)\s(?P=word)", 1.0).search("say hello hello") is not None
    # whether a search could run across lines, as re's parser sees it
    assert not can_match_newline(GrepPattern("a.b", 1.0))
    assert can_match_newline(GrepPattern("(?s)a.b", 1.0))
    assert can_match_newline(GrepPattern("a(?s:.)b", 1.0))
    assert can_match_newline(GrepPattern(r"\p{L}x", 1.0))  # regex-only syntax: per line


def test_a_scoped_dotall_group_still_matches_line_by_line(store: ObservationStore) -> None:
    entry = store.put("xa\nbx\nab\n", turn_id="turn")
    assert store.read(entry, "grep", pattern="a(?s:.)b").matches == 0  # no line has a?b
