"""Stored text entries scrubbed again, after a secret was added that they may hold.

Each text entry is streamed through the scrubber chunk by chunk (a secret split across two
chunks is still caught). Only an entry whose content or metadata changes is rewritten, in one
transaction: its content re-chunked exactly as a new entry of that text would be, its sizes
and summary recomputed, its id, turn, step, tool, creation time and expiry kept. Freed pages
are overwritten (``secure_delete``) and the WAL is truncated afterwards, so the old text does
not linger in the database files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scratchpad.observations.chunks import (
    TEXT_ENCODING,
    TEXT_ERRORS,
    Chunk,
    ChunkSource,
    PreparedContent,
    TextChunker,
)
from scratchpad.observations.connections import ConnectionPool
from scratchpad.observations.summary import SUMMARY_EDGE_CHARS, storable, summarize_edges
from scratchpad.observations.validation import metadata_json

if TYPE_CHECKING:
    from scratchpad.scrub import Scrubber

log = logging.getLogger(__name__)
HEAD_CHARS = 2 * SUMMARY_EDGE_CHARS


@dataclass(frozen=True, slots=True)
class RescrubCounts:
    """Text entries looked at, and those rewritten."""

    checked: int
    changed: int


@dataclass(slots=True)
class _Scrubbed:
    changed: bool
    metadata: dict[str, Any]
    head: str
    tail: str
    prepared: PreparedContent | None


def rescrub_entries(pool: ConnectionPool, scrubber: Scrubber, chunk_bytes: int) -> RescrubCounts:
    """Scrub every stored text entry again; rewrite those that change."""
    with pool.reading() as connection:
        rows = connection.execute(
            "SELECT id FROM entries WHERE content_kind = 'text' ORDER BY rowid"
        ).fetchall()
    changed = 0
    for (entry_id,) in rows:
        with pool.reading() as connection:  # a look first: writers wait only for real changes
            found = _scrub_entry(connection, entry_id, scrubber, None)
        if found is not None and found.changed:
            changed += rewrite_entry(pool, entry_id, scrubber, chunk_bytes)
    if changed:
        truncate_wal(pool)
    return RescrubCounts(len(rows), changed)


def rewrite_entry(
    pool: ConnectionPool, entry_id: str, scrubber: Scrubber, chunk_bytes: int
) -> bool:
    """Rewrite one text entry scrubbed, in one transaction; whether it changed."""
    with pool.connection() as connection:
        connection.execute("PRAGMA secure_delete = ON")  # freed pages keep no old text
        try:
            connection.execute("BEGIN IMMEDIATE")
            found = _scrub_entry(connection, entry_id, scrubber, TextChunker(chunk_bytes))
            if found is None or not found.changed:
                connection.execute("ROLLBACK")
                return False
            _replace(connection, entry_id, found)
            connection.execute("COMMIT")
            return True
        finally:
            connection.execute("PRAGMA secure_delete = OFF")


def truncate_wal(pool: ConnectionPool) -> None:
    """Copy the WAL into the database and empty it (old page versions go with it)."""
    with pool.connection() as connection:
        busy = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    if busy:
        log.warning(
            "%s: readers kept the WAL from being truncated; old text may stay in %s-wal "
            "until the next checkpoint",
            pool.path,
            pool.path.name,
        )


def _scrub_entry(
    connection: sqlite3.Connection,
    entry_id: str,
    scrubber: Scrubber,
    chunker: TextChunker | None,
) -> _Scrubbed | None:
    """Stream one entry through the scrubber; with a ``chunker``, its new chunks are
    inserted under negative sequence numbers (see :func:`_replace`)."""
    row = connection.execute(
        "SELECT metadata, content IS NOT NULL FROM entries WHERE id = ? AND content_kind = 'text'",
        (entry_id,),
    ).fetchone()
    if row is None:  # gone (gc) since it was listed
        return None
    metadata = json.loads(row[0])
    scrubbed_metadata = scrubber.scrub_data(metadata)
    stream = scrubber.stream()
    old, new = hashlib.blake2b(), hashlib.blake2b()
    head = tail = ""

    def emit(text: str) -> None:
        nonlocal head, tail
        if not text:
            return
        new.update(text.encode(TEXT_ENCODING, TEXT_ERRORS))
        if len(head) < HEAD_CHARS:
            head += text[: HEAD_CHARS - len(head)]
        tail = (tail[-SUMMARY_EDGE_CHARS:] + text[-SUMMARY_EDGE_CHARS:])[-SUMMARY_EDGE_CHARS:]
        if chunker is not None:
            _insert_chunks(connection, entry_id, chunker.feed(text))

    for chunk, text in ChunkSource(connection, entry_id, bool(row[1])).texts():
        old.update(chunk.data)
        emit(stream.feed(text))
    emit(stream.flush())
    prepared = None
    if chunker is not None:
        prepared = chunker.finish()
        _insert_chunks(connection, entry_id, prepared.chunks)
    changed = old.digest() != new.digest() or scrubbed_metadata != metadata
    return _Scrubbed(changed, scrubbed_metadata, head, tail, prepared)


def _insert_chunks(connection: sqlite3.Connection, entry_id: str, chunks: list[Chunk]) -> None:
    connection.executemany(
        "INSERT INTO content_chunks (entry_id, seq, byte_start, char_start, line_start, data) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        ((entry_id, -1 - c.seq, c.byte_start, c.char_start, c.line_start, c.data) for c in chunks),
    )


def _replace(connection: sqlite3.Connection, entry_id: str, found: _Scrubbed) -> None:
    """The new chunks take the old ones' place; the entry's row describes the new text."""
    prepared = found.prepared
    assert prepared is not None
    connection.execute("DELETE FROM content_chunks WHERE entry_id = ? AND seq >= 0", (entry_id,))
    connection.execute(
        "UPDATE content_chunks SET seq = -1 - seq WHERE entry_id = ? AND seq < 0", (entry_id,)
    )
    summary = storable(summarize_edges(found.head, found.tail, prepared.char_count))
    connection.execute(
        "UPDATE entries SET content = ?, size_bytes = ?, char_count = ?, line_count = ?, "
        "summary = ?, metadata = ? WHERE id = ?",
        (
            prepared.inline,
            prepared.size_bytes,
            prepared.char_count,
            prepared.line_count,
            summary,
            metadata_json(found.metadata),
            entry_id,
        ),
    )
