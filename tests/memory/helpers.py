"""Shared helpers of the agent-state tests: replies, a fixed clock, an agent on a tmp dir."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scratchpad.memory import AgentConfig, CycleAgent, ScriptedModel, ToolsConfig

RULES = "You are a test agent."
NO_PADS = AgentConfig(tools=ToolsConfig(pads=False))


def reply(tool: str, **args: Any) -> str:
    """A model reply calling ``tool`` with ``args``."""
    return json.dumps({"tool": tool, "args": args})


def fixed_clock(moment: dt.datetime | None = None) -> Callable[[], dt.datetime]:
    """A clock that never moves (every cycle starts in the same second)."""
    fixed = moment or dt.datetime(2025, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    return lambda: fixed


def moving_clock(
    start: dt.datetime | None = None, step: dt.timedelta = dt.timedelta(seconds=1)
) -> Callable[[], dt.datetime]:
    """A clock that moves ``step`` forward every time it is read."""
    moments = itertools.count()
    first = start or dt.datetime(2025, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    return lambda: first + next(moments) * step


def make_agent(
    root: Path,
    replies: Sequence[str | BaseException],
    *,
    config: AgentConfig = NO_PADS,
    **kwargs: Any,
) -> tuple[CycleAgent, ScriptedModel]:
    model = ScriptedModel(replies)
    return CycleAgent(root, model, config=config, rules=RULES, **kwargs), model
