"""What the model sees instead of a large observation: a head/tail summary and an id."""

from __future__ import annotations

import hashlib
import json
from typing import Any

SUMMARY_EDGE_CHARS = 500
OFFLOAD_NOTE = "Large observation saved. Read it in full or in part with read_observation."


def summarize(content: str | bytes) -> str:
    """First and last 500 characters with the exact count omitted; a fingerprint for bytes."""
    if not isinstance(content, str):
        digest = hashlib.sha256(content).hexdigest()
        return f"[BINARY: {len(content)} bytes, sha256={digest}]"
    if len(content) <= 2 * SUMMARY_EDGE_CHARS:
        return content
    omitted = len(content) - 2 * SUMMARY_EDGE_CHARS
    return (
        f"{content[:SUMMARY_EDGE_CHARS]}[... {omitted} characters omitted ...]"
        f"{content[-SUMMARY_EDGE_CHARS:]}"
    )


def serialized_size(observation: dict[str, Any]) -> int:
    """``len(json.dumps(observation))``, with bytes counted by their length."""
    binary = 0

    def bytes_as_empty(value: object) -> object:
        nonlocal binary
        if isinstance(value, (bytes, bytearray, memoryview)):
            binary += len(bytes(value))
            return ""
        return repr(value)  # anything else JSON cannot take is counted by its repr

    return len(json.dumps(observation, default=bytes_as_empty)) + binary


def split_observation(observation: dict[str, Any]) -> tuple[str | bytes, dict[str, Any]]:
    """The large part to store, and the small fields to keep as metadata.

    The large part is ``content`` when it is text or bytes; otherwise the whole observation
    serialized as JSON.
    """
    content = observation.get("content")
    small = {k: v for k, v in observation.items() if k not in ("content", "ok")}
    if isinstance(content, (bytes, bytearray, memoryview)):
        return bytes(content), _jsonable(small)
    if isinstance(content, str):
        return content, _jsonable(small)
    return json.dumps(observation, default=repr, ensure_ascii=False, indent=1), {}


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
    return dict(json.loads(json.dumps(fields, default=repr)))
