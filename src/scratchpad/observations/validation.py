"""Checks of the store's arguments; each failure is an InvalidInputError saying what to pass."""

from __future__ import annotations

import json
from typing import Any

from scratchpad.errors import InvalidInputError

MAX_INT64 = 2**63 - 1


def check_int(name: str, value: object, *, minimum: int, maximum: int = MAX_INT64) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        bound = f">= {minimum}" if maximum == MAX_INT64 else f"between {minimum} and {maximum}"
        raise InvalidInputError(f"{name} must be an integer {bound}, not {value!r}")
    return value


def check_text(name: str, value: object, *, optional: bool = False) -> None:
    """A non-empty string that SQLite can store (no lone surrogates)."""
    if value is None and optional:
        return
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"{name} must be a non-empty string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{name} contains characters that are not valid text") from exc


def check_put(
    content: object,
    turn_id: object,
    step_num: object,
    tool: object,
    metadata: object,
    ttl_seconds: object,
) -> None:
    if not isinstance(content, (str, bytes, bytearray, memoryview)):
        raise InvalidInputError(
            f"content must be str (text) or bytes (binary), not {type(content).__name__}"
        )
    check_text("turn_id", turn_id)
    if step_num is not None:
        check_int("step_num", step_num, minimum=0)
    check_text("tool", tool, optional=True)
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidInputError("metadata must be a dict")
    if ttl_seconds is not None and (
        isinstance(ttl_seconds, bool)
        or not isinstance(ttl_seconds, (int, float))
        or not 0 < ttl_seconds < float("inf")
    ):
        raise InvalidInputError(f"ttl_seconds must be a number > 0, not {ttl_seconds!r}")


def metadata_json(metadata: dict[str, Any] | None) -> str:
    """Metadata as JSON (ASCII, so any string survives), or a clear error."""
    try:
        return json.dumps(metadata or {})
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"metadata must be JSON-serializable: {exc}") from exc


def char_range(
    start: int | None, end: int | None, n: int, total: int, cap: int, unit: str = "characters"
) -> tuple[int, int]:
    """``start``..``end`` (exclusive) within ``total``; ``end`` defaults to ``start + n``."""
    if start is None:
        raise InvalidInputError("range needs start (and end, exclusive), e.g. start=0, end=2000")
    check_int("start", start, minimum=0)
    if end is None:
        end = start + n
    check_int("end", end, minimum=0)
    if end <= start:
        raise InvalidInputError(f"end ({end}) must be greater than start ({start})")
    if start >= total and start > 0:
        raise InvalidInputError(f"start ({start}) is past the end: the content has {total} {unit}")
    return start, min(end, start + cap, total)


def line_range(start: int | None, end: int | None, total: int) -> tuple[int, int]:
    """1-based inclusive lines within ``total``; ``end`` defaults to 100 lines on."""
    first = 1 if start is None else check_int("start", start, minimum=1)
    last = first + 99 if end is None else check_int("end", end, minimum=1)
    if last < first:
        raise InvalidInputError(f"end ({last}) must not be before start ({first})")
    if first > total and first > 1:
        raise InvalidInputError(f"start ({first}) is past the end: the content has {total} lines")
    return first, min(last, total)
