"""The agent's own settings, from ``ROOT/config.yaml`` (optional; every key has a default).

They live beside the agent rather than in ``SCRATCHPAD_*`` variables because two agent
directories on one machine usually want different limits and tools.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from scratchpad.errors import ConfigError

THIRTY_DAYS_S = 30 * 24 * 3600.0


class ToolsConfig(BaseModel):
    """Which tools the model is offered, and the shell tool's limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pads: bool = True
    shell: bool = False
    shell_timeout_s: float = Field(30.0, gt=0)
    shell_output_cap_chars: int = Field(10_000, ge=100)


class AgentConfig(BaseModel):
    """Settings of one agent directory (unknown keys are refused, so typos are caught)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_iterations: int = Field(10, ge=1)
    notes_cap_chars: int = Field(8000, ge=1000)
    keep_last: int | None = Field(None, ge=1)
    model: str | None = None
    archive_ttl_s: float = Field(THIRTY_DAYS_S, gt=0)
    tools: ToolsConfig = ToolsConfig()


def load_config(path: Path) -> AgentConfig:
    """The settings in ``path``; the defaults when it is missing or only has comments."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return AgentConfig()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc}); fix or remove it") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "syntax error"
        raise ConfigError(f"{path}: not valid YAML ({first}); fix it or remove it") from exc
    if data is None:
        return AgentConfig()
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a mapping of settings (max_iterations: 10, ...)")
    return _validated(path, data)


def _validated(path: Path, data: dict[str, Any]) -> AgentConfig:
    try:
        return AgentConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_problem(error) for error in exc.errors())
        raise ConfigError(
            f"{path}: {problems}. Fix the key(s); `scratchpad agent init` shows every key "
            "with its default in a fresh config.yaml."
        ) from exc


def _problem(error: ErrorDetails) -> str:
    key = ".".join(str(part) for part in error["loc"]) or "(top level)"
    if error["type"] == "extra_forbidden":
        return f"key {key!r} is not a setting"
    return f"key {key!r}: {error['msg']} (got {error.get('input')!r})"
