"""Text where it enters the core: lone surrogates become U+FFFD, so every string that later
leaves a process (SSE, JSON, MCP, history, notebook, terminal) is valid UTF-8 and nothing
downstream has to care; and long text keeps its head and tail with a note of what was cut."""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def find_control(text: str) -> re.Match[str] | None:
    """The first control character (or unpaired surrogate) of ``text``: none may reach a
    file name, an environment variable or a command line."""
    return _CONTROL.search(text)


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (fast for the usual ASCII)."""
    if text.isascii():
        return text
    return _SURROGATE.sub("\ufffd", text)


def clean_data(value: Any) -> Any:
    """:func:`clean_text` applied to every string in JSON-like data (keys included)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_data(key): clean_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_data(item) for item in value]
    return value


def cut_middle(text: str, cap: int, unit: str = "characters") -> str:
    """``text`` if it has at most ``cap`` characters, else its head and tail around a note
    saying how much was cut."""
    if len(text) <= cap:
        return text
    half = cap // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} {unit} cut ...]\n{text[-half:]}"
