"""Stored JSON text scrubbed again, after a secret was added that it may hold.

A JSON document or a JSON-lines file is scrubbed value by value (a key-shaped string after an
escaped newline is caught as it is in the text itself; a string that is JSON itself, a tool's
input in an episodic log, is scrubbed inside too); text that is no JSON (a torn last line) is
scrubbed as text. A file is rewritten atomically, keeping its mode, only when something in it
changed; line files are streamed, never loaded whole. Which files hold such text is for their
owners to say.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scratchpad.fsutil import atomic_write_chunks
from scratchpad.scrub.matcher import Scrubber


def rescrub_lines(path: Path, scrub: Scrubber) -> bool:
    """Scrub a JSON-lines file line by line; rewrite it (atomically, its mode kept) only when
    a line changed. Whether it did. Streams: one line in memory at a time."""
    if not lines_need_scrub(path, scrub):
        return False

    def lines() -> Iterator[bytes]:
        with path.open("rb") as handle:
            for line in handle:
                yield scrub_line(line, scrub)

    atomic_write_chunks(path, lines())
    return True


def lines_need_scrub(path: Path, scrub: Scrubber) -> bool:
    """Whether a line of a JSON-lines file would change (read only, stops at the first)."""
    with path.open("rb") as handle:
        return any(scrub_line(line, scrub) is not line for line in handle)


def rescrub_json_file(path: Path, scrub: Scrubber) -> bool:
    """Scrub one JSON document (a session history); rewrite it only when it changed."""
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    scrubbed = scrub_json_text(text, scrub)
    if scrubbed is text:
        return False
    atomic_write_chunks(path, (_encode(scrubbed),))
    return True


def scrub_line(line: bytes, scrub: Scrubber) -> bytes:
    """One line of a JSON-lines file scrubbed; ``line`` itself when nothing changed."""
    text = line.decode("utf-8", "surrogateescape")
    body = text.rstrip("\r\n")
    scrubbed = scrub_json_text(body, scrub)
    if scrubbed is body:
        return line
    return _encode(scrubbed + text[len(body) :])


def scrub_json_text(text: str, scrub: Scrubber) -> str:
    """JSON text with its values scrubbed (``text`` itself when nothing changed); text that is
    no JSON (a torn last line) is scrubbed as text. Values are decoded first: a secret's
    escaped forms nest (the repr in a cell's code, JSON-escaped once more in the file)."""
    if not text.strip():
        return text
    try:
        data = json.loads(text)
    except ValueError:
        scrubbed = scrub.scrub(text)
        return text if scrubbed == text else scrubbed
    cleaned = _scrub_value(data, scrub)
    if cleaned == data:
        return text
    return json.dumps(cleaned, ensure_ascii=False)


def _scrub_value(value: Any, scrub: Scrubber) -> Any:
    """:meth:`Scrubber.scrub_data`, also inside strings that are JSON themselves (a tool's
    input in the episodic log): their escaped forms nest once more."""
    if isinstance(value, str):
        if value[:1] in ("{", "[") and "\\" in value:
            try:
                inner = json.loads(value)
            except ValueError:
                return scrub.scrub(value)
            cleaned = _scrub_value(inner, scrub)
            if cleaned != inner:
                value = json.dumps(cleaned, ensure_ascii=False)
        return scrub.scrub(value)
    if isinstance(value, dict):
        return {_scrub_value(k, scrub): _scrub_value(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_value(item, scrub) for item in value]
    return value


def _encode(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate JSON decoded from an escape
        return text.encode("utf-8", "replace")
