"""What the model sees instead of a large observation: a head/tail summary and an id."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from scratchpad.errors import InvalidInputError

SUMMARY_EDGE_CHARS = 500
SMALL_FIELD_CHARS = 200  # fields kept as metadata when the whole observation is stored
OFFLOAD_NOTE = "Large observation saved. Read it in full or in part with read_observation."


def summarize(content: str | bytes) -> str:
    """First and last 500 characters with the exact count omitted; a fingerprint for bytes."""
    if not isinstance(content, str):
        digest = hashlib.sha256(content).hexdigest()
        return f"[BINARY: {len(content)} bytes, sha256={digest}]"
    return summarize_edges(
        content[: 2 * SUMMARY_EDGE_CHARS], content[-SUMMARY_EDGE_CHARS:], len(content)
    )


def summarize_edges(head: str, tail: str, total: int) -> str:
    """The summary of a text of ``total`` characters from its first 1000 and last 500 (what
    :func:`summarize` keeps, for text read as a stream)."""
    if total <= 2 * SUMMARY_EDGE_CHARS:
        return head
    omitted = total - 2 * SUMMARY_EDGE_CHARS
    return (
        f"{head[:SUMMARY_EDGE_CHARS]}[... {omitted} characters omitted ...]"
        f"{tail[-SUMMARY_EDGE_CHARS:]}"
    )


def storable(text: str) -> str:
    """Text SQLite accepts: lone surrogates (from undecodable tool output) are escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def serialized_size(observation: dict[str, Any]) -> int:
    """``len(json.dumps(observation))``, with bytes counted by their length."""
    binary = 0

    def bytes_as_empty(value: object) -> object:
        nonlocal binary
        if isinstance(value, (bytes, bytearray, memoryview)):
            binary += len(bytes(value))
            return ""
        return repr(value)  # anything else JSON cannot take is counted by its repr

    try:
        return len(json.dumps(observation, default=bytes_as_empty)) + binary
    except (TypeError, ValueError) as exc:  # non-string keys, circular references
        raise InvalidInputError(f"the observation cannot be serialized as JSON: {exc}") from exc


def split_observation(
    observation: dict[str, Any], threshold: int
) -> tuple[str | bytes, dict[str, Any]]:
    """The large part to store, and the small fields to keep as metadata.

    The large part is ``content`` when it is text or bytes and the other fields are small;
    otherwise the whole observation serialized as JSON (keeping its small fields as metadata).
    """
    content = observation.get("content")
    rest = _jsonable({k: v for k, v in observation.items() if k not in ("content", "ok")})
    if isinstance(content, (str, bytes, bytearray, memoryview)) and (
        len(json.dumps(rest)) <= threshold
    ):
        return (content if isinstance(content, str) else bytes(content)), rest
    small = {k: v for k, v in rest.items() if len(json.dumps(v)) <= SMALL_FIELD_CHARS}
    whole = json.dumps(observation, default=_json_default, ensure_ascii=False, indent=1)
    return whole, small


def synthetic_observation(
    observation: dict[str, Any],
    *,
    observation_id: str,
    kind: str,
    size_bytes: int,
    summary: str,
    metadata: dict[str, Any],
) -> dict[str, Any]:
    return {
        "ok": observation.get("ok", True),
        "observation_id": observation_id,
        "size_bytes": size_bytes,
        "kind": kind,
        "summary": summary,
        "metadata": metadata,
        "_note": OFFLOAD_NOTE,
    }


def _jsonable(fields: dict[str, Any]) -> dict[str, Any]:
    """Metadata must survive JSON: anything else is kept as its repr."""
    return dict(json.loads(json.dumps(fields, default=_json_default)))


def _json_default(value: object) -> object:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(bytes(value))} bytes>"
    return repr(value)
