"""``{{stepN.field}}`` references in tool arguments, replaced by stored values.

A model that saw only the summary of step 1 can still pass step 1's full content on:
``fs_write(content="{{step1.content}}")``. A string that is exactly one reference becomes the
value itself (bytes stay bytes); references inside longer text are replaced by their text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from scratchpad.errors import ObservationError

REFERENCE = re.compile(r"\{\{\s*step(\d+)\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
ANY_REFERENCE = re.compile(r"\{\{\s*step.*?\}\}")

Lookup = Callable[[int, str], Any]


def resolve(value: Any, lookup: Lookup) -> Any:
    """``value`` with every reference in nested dicts, lists and strings replaced."""
    if isinstance(value, str):
        return _resolve_text(value, lookup)
    if isinstance(value, dict):
        return {key: resolve(item, lookup) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [resolve(item, lookup) for item in value]
    return value


def _resolve_text(text: str, lookup: Lookup) -> Any:
    if "{{" not in text:
        return text
    for candidate in ANY_REFERENCE.finditer(text):
        if REFERENCE.fullmatch(candidate.group(0)) is None:
            raise ObservationError(
                f"malformed reference {candidate.group(0)!r}: write {{{{stepN.field}}}}, "
                "e.g. {{step1.content}}"
            )
    whole = REFERENCE.fullmatch(text)
    if whole is not None:
        return lookup(int(whole.group(1)), whole.group(2))

    def replace(match: re.Match[str]) -> str:
        found = lookup(int(match.group(1)), match.group(2))
        if isinstance(found, str):
            return found
        if isinstance(found, bytes):
            raise ObservationError(
                f"{match.group(0)} is binary content: it can only be passed as a whole "
                "argument, not inside other text"
            )
        return json.dumps(found, ensure_ascii=False)

    return REFERENCE.sub(replace, text)
