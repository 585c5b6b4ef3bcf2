"""The agent's state: its schema, reading and validating ``active.yaml``, writing it back.

A state is a plain ``dict`` (unknown keys are kept, in their order). Loading never changes
the file: a hand-edited state with broken YAML or a key of the wrong type raises
:class:`AgentStateError` naming the file and the key, and the file stays as it is.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scratchpad.errors import AgentStateError
from scratchpad.fsutil import atomic_write_text

State = dict[str, Any]
"""An agent's working memory: the YAML mapping of its state file."""

DEFAULT_STATE: Mapping[str, Any] = {
    "goals": [],
    "current_task": None,
    "pending_actions": [],
    "completed_tasks": [],
    "notes": "",
    "last_updated": None,
}
# The type each schema key must have (current_task may be anything: text or a mapping).
EXPECTED: Mapping[str, tuple[type, ...]] = {
    "goals": (list,),
    "pending_actions": (list,),
    "completed_tasks": (list,),
    "notes": (str,),
    "last_updated": (str, type(None)),
}
TYPE_WORDS: dict[type, str] = {list: "a list (e.g. [] or '- item' lines)", str: "text"}
HOW_TO_FIX = (
    "Fix it by hand, or put back a snapshot with `scratchpad agent restore ROOT CYCLE`; "
    "the file was left unchanged."
)


def default_state() -> State:
    """A fresh copy of the default state."""
    return copy.deepcopy(dict(DEFAULT_STATE))


# libyaml's safe loader and emitter when PyYAML has them: same safe types, ~100x faster on
# long notes (a 500 kB state loads in 10 ms instead of a second).
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SafeDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_SafeDumper):  # type: ignore[misc]
    """safe_dump with multi-line strings in block style (``|``), so notes read like text."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def dump_state(state: Mapping[str, Any]) -> str:
    """The YAML text of a state (keys in their order, unicode kept, notes as a block)."""
    clean = _encodable(dict(state))
    text: str = yaml.dump(clean, Dumper=_Dumper, sort_keys=False, allow_unicode=True)
    return text


def _encodable(value: Any) -> Any:
    """``value`` with lone surrogates (JSON ``"\\ud800"`` from a model) replaced by U+FFFD,
    which UTF-8 cannot store."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        return value
    if isinstance(value, dict):
        return {_encodable(key): _encodable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_encodable(item) for item in value]
    return value


def safe_load(text: str) -> Any:
    """``yaml.safe_load``, through libyaml when available."""
    return yaml.load(text, Loader=_SafeLoader)  # a safe loader: plain YAML types only


def parse_state(text: str, source: str | Path) -> State:
    """Parse and validate state YAML; an empty document is the default state."""
    try:
        data = safe_load(text)
    except yaml.YAMLError as exc:
        problem = _yaml_problem(exc)
        raise AgentStateError(f"{source}: not valid YAML ({problem}). {HOW_TO_FIX}") from exc
    if data is None:
        return default_state()
    if not isinstance(data, dict):
        raise AgentStateError(
            f"{source}: the state must be a mapping of keys (goals:, notes:, ...), "
            f"not {_describe(data)}. {HOW_TO_FIX}"
        )
    return validate_state(data, source)


def validate_state(data: Mapping[Any, Any], source: str | Path, *, hint: str = HOW_TO_FIX) -> State:
    """The schema keys first (missing or null ones from the default), then unknown keys.

    A key of the wrong type raises AgentStateError: ``<source>: <problem>. <hint>``.
    """
    for key in data:
        if not isinstance(key, str):
            raise _invalid(source, f"key {key!r} is not text", hint)
    state: State = {}
    for key, default in DEFAULT_STATE.items():
        value = data.get(key)
        if value is None:
            value = copy.deepcopy(default)
        if key == "last_updated" and isinstance(value, (dt.date, dt.datetime)):
            value = value.isoformat()  # an unquoted timestamp typed by hand
        expected = EXPECTED.get(key)
        if expected is not None and not isinstance(value, expected):
            wanted = TYPE_WORDS[expected[0]] if len(expected) == 1 else "an ISO time or null"
            raise _invalid(source, f"key {key!r} must be {wanted}, not {_describe(value)}", hint)
        state[key] = value
    state.update((key, value) for key, value in data.items() if key not in state)
    return state


def _invalid(source: str | Path, problem: str, hint: str) -> AgentStateError:
    return AgentStateError(f"{source}: {problem}" + (f". {hint}" if hint else ""))


@dataclass(frozen=True, slots=True)
class ReadState:
    """What a wake read: the exact text (or the default state dumped) and the parsed state."""

    text: str
    state: State
    existed: bool


def read_state(path: Path) -> ReadState:
    """Read ``path`` once; the default state when it does not exist."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        state = default_state()
        return ReadState(dump_state(state), state, existed=False)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AgentStateError(f"{path}: not UTF-8 text ({exc.reason}). {HOW_TO_FIX}") from None
    return ReadState(text, parse_state(text, path), existed=True)


def load_state(path: Path) -> State:
    """The state in ``path`` (the default when missing); never writes."""
    return read_state(path).state


def save_state(path: Path, state: Mapping[str, Any]) -> None:
    """Write the state atomically (a crash leaves the old file or the new one)."""
    atomic_write_text(path, dump_state(state))


def clear_stale_temps(directory: Path) -> list[Path]:
    """Remove temp files left by writers that were killed mid-write (call under the lock)."""
    if not directory.is_dir():
        return []
    stale = [p for p in directory.glob(".*.tmp") if p.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def _describe(value: object) -> str:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    kind = "null" if value is None else type(value).__name__
    return f"{kind} {shown}" if value is not None else kind


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return str(problem)
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
