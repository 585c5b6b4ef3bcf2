"""Conditional and partial downloads (RFC 9110 §8.8, §13, §14): every download says its
``ETag`` and ``Last-Modified`` and ``Accept-Ranges: bytes``; ``If-None-Match`` (else
``If-Modified-Since``) answers 304 when the client's copy is current; one byte range
(``bytes=a-b``, ``a-``, ``-n``) answers 206, ``If-Range`` honoured; a range that starts past
the end answers 416. Several ranges in one request get the whole file (the RFC lets a server
ignore ``Range``); so do a malformed one and HEAD, for which ranges are not defined.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from typing import Any

from fastapi.responses import JSONResponse, Response
from starlette.datastructures import Headers

from scratchpad.server.guard import error

RANGE_UNIT = "bytes="


@dataclass(frozen=True)
class Validators:
    """What identifies one version of a download: a strong ETag and, when known, the time
    it was last changed (seconds since the epoch)."""

    etag: str
    modified: float | None = None

    @classmethod
    def of_file(cls, info: os.stat_result) -> Validators:
        """A file's version: its inode, size and modification time (nanoseconds)."""
        return cls(f'"{info.st_ino:x}-{info.st_size:x}-{info.st_mtime_ns:x}"', info.st_mtime)

    @classmethod
    def of_bytes(cls, body: bytes, modified: float | None = None) -> Validators:
        """A generated download's version: a hash of its bytes."""
        return cls(f'"{hashlib.sha256(body).hexdigest()[:32]}"', modified)

    def headers(self) -> dict[str, str]:
        found = {"etag": self.etag, "accept-ranges": "bytes"}
        if self.modified is not None:
            found["last-modified"] = formatdate(self.modified, usegmt=True)
        return found


@dataclass(frozen=True)
class Plan:
    """What to answer: ``status`` (200, 206, 304 or 416), the bytes ``start`` and ``length``
    to send, and the headers that go with them."""

    status: int
    start: int
    length: int
    headers: dict[str, str] = field(default_factory=dict)


def plan(request_headers: Headers, method: str, size: int, version: Validators) -> Plan:
    """The answer to a GET or HEAD of ``size`` bytes at ``version``."""
    headers = version.headers()
    if _not_modified(request_headers, version):
        return Plan(304, 0, 0, headers)
    whole = Plan(200, 0, size, {**headers, "content-length": str(size)})
    wanted = request_headers.get("range")
    if method != "GET" or wanted is None or not _if_range(request_headers, version):
        return whole
    span = _single_range(wanted, size)
    if span is None:
        return whole
    start, end = span
    if start >= size:
        return Plan(416, 0, 0, {**headers, "content-range": f"bytes */{size}"})
    length = end - start + 1
    partial = {"content-range": f"bytes {start}-{end}/{size}", "content-length": str(length)}
    return Plan(206, start, length, {**headers, **partial})


def answer_bytes(
    request_headers: Headers,
    method: str,
    body: bytes,
    media_type: str,
    headers: dict[str, str],
    version: Validators,
) -> Response:
    """A generated download (``body``) answered as :func:`plan` says."""
    decided = plan(request_headers, method, len(body), version)
    if decided.status in (304, 416):
        return special(decided, headers, len(body))
    chunk = b"" if method == "HEAD" else body[decided.start : decided.start + decided.length]
    return Response(
        chunk,
        status_code=decided.status,
        media_type=media_type,
        headers={**headers, **decided.headers},
    )


def special(decided: Plan, headers: dict[str, str], size: int) -> Response:
    """The 304 (no body) or 416 (the error body) of :func:`plan`."""
    if decided.status == 304:
        return Response(status_code=304, headers={**headers, **decided.headers})
    refused: JSONResponse = error(
        416,
        f"the range asked for starts past the end of the {size} bytes; ask for "
        f"bytes=0-{max(size - 1, 0)} or less, or leave Range out for the whole",
        "InvalidInputError",
    )
    refused.headers.update(
        {k: v for k, v in {**headers, **decided.headers}.items() if k != "content-disposition"}
    )
    return refused


def _not_modified(request_headers: Headers, version: Validators) -> bool:
    """Whether the client's copy is current: If-None-Match decides when sent (weak
    comparison), else If-Modified-Since against Last-Modified (whole seconds)."""
    tags = request_headers.get("if-none-match")
    if tags is not None:
        return tags.strip() == "*" or _weak(version.etag) in {_weak(t) for t in tags.split(",")}
    since = _date(request_headers.get("if-modified-since"))
    return since is not None and version.modified is not None and int(version.modified) <= since


def _if_range(request_headers: Headers, version: Validators) -> bool:
    """Whether a Range applies: no If-Range, or one naming this version (strong ETag
    comparison, or exactly its Last-Modified date)."""
    condition = request_headers.get("if-range")
    if condition is None:
        return True
    condition = condition.strip()
    if condition.startswith(('"', "W/")):
        return condition == version.etag
    since = _date(condition)
    return since is not None and version.modified is not None and int(version.modified) == since


def _single_range(value: str, size: int) -> tuple[int, int] | None:
    """(first, last) byte of one range spec; ``first`` >= ``size`` when unsatisfiable; None
    when it is not one well-formed byte range (then the whole file is sent)."""
    value = value.strip()
    if not value.lower().startswith(RANGE_UNIT) or "," in value:
        return None
    first, dash, last = value[len(RANGE_UNIT) :].strip().partition("-")
    first, last = first.strip(), last.strip()
    if not dash or not (first.isdigit() or first == "") or not (last.isdigit() or last == ""):
        return None
    if first == "":
        if last == "":
            return None
        suffix = int(last)  # the last N bytes
        return (size, size) if suffix == 0 else (max(size - suffix, 0), size - 1)
    start = int(first)
    if last != "" and int(last) < start:
        return None
    if start >= size:
        return start, start
    return start, size - 1 if last == "" else min(int(last), size - 1)


def _weak(tag: str) -> str:
    return tag.strip().removeprefix("W/")


def _date(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(parsedate_to_datetime(value).timestamp())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def documented(
    media: dict[str, Any], headers: dict[str, Any] | None = None
) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI answers a conditional download adds to its 200 (``media``: its content):
    206 and 304, with the headers each carries (``headers``: more of them)."""
    validators = {**VALIDATOR_HEADERS, **(headers or {})}
    ranges = {
        "content-range": {
            "description": "The bytes sent and the whole size: `bytes first-last/size`.",
            "schema": {"type": "string", "pattern": "^bytes [0-9]+-[0-9]+/[0-9]+$"},
        }
    }
    return {
        206: {
            "description": "One byte range of it (`Range: bytes=first-last`, `first-` or "
            "`-count`; several ranges at once get the whole file).",
            "content": media,
            "headers": {**validators, **ranges},
        },
        304: {
            "description": "Not modified: the client's copy (`If-None-Match`, else "
            "`If-Modified-Since`) is current.",
            "headers": validators,
        },
    }


VALIDATOR_HEADERS: dict[str, Any] = {
    "etag": {
        "description": "This version, for `If-None-Match` and `If-Range`.",
        "schema": {"type": "string", "pattern": '^"[0-9a-f-]+"$'},
    },
    "accept-ranges": {
        "description": "Byte ranges are answered.",
        "schema": {"type": "string", "const": "bytes"},
    },
}
LAST_MODIFIED: dict[str, Any] = {
    "last-modified": {
        "description": "When it last changed (HTTP date), for `If-Modified-Since`.",
        "schema": {"type": "string"},
    }
}
