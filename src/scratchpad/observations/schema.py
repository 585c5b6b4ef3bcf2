"""The observation store's schema, changed only through ordered, recorded migrations.

Content of up to ``CHUNK_BYTES`` lives in ``entries.content``. Larger content is split into
``content_chunks`` rows (``content`` is then NULL), each knowing the byte, character and line
offset where it starts, so a slice anywhere in a 100 MB entry reads one or two chunks.
"""

from __future__ import annotations

import sqlite3
import time

CHUNK_BYTES = 64 * 1024

# (version, name, statements). Append only: never edit a migration that has shipped.
MIGRATIONS: list[tuple[int, str, tuple[str, ...]]] = [
    (
        1,
        "entries and content chunks",
        (
            """CREATE TABLE entries (
                id TEXT PRIMARY KEY,
                turn_id TEXT NOT NULL,
                step_num INTEGER,
                tool TEXT,
                content_kind TEXT NOT NULL CHECK (content_kind IN ('text', 'binary')),
                content BLOB,
                size_bytes INTEGER NOT NULL,
                char_count INTEGER NOT NULL,
                line_count INTEGER NOT NULL,
                summary TEXT NOT NULL,
                metadata TEXT NOT NULL DEFAULT '{}',
                created_at REAL NOT NULL,
                expires_at REAL NOT NULL
            )""",
            "CREATE INDEX entries_turn ON entries (turn_id, step_num)",
            "CREATE INDEX entries_expiry ON entries (expires_at)",
            """CREATE TABLE content_chunks (
                entry_id TEXT NOT NULL REFERENCES entries (id) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                byte_start INTEGER NOT NULL,
                char_start INTEGER NOT NULL,
                line_start INTEGER NOT NULL,
                data BLOB NOT NULL,
                PRIMARY KEY (entry_id, seq)
            )""",
            "CREATE INDEX chunks_by_char ON content_chunks (entry_id, char_start)",
            "CREATE INDEX chunks_by_byte ON content_chunks (entry_id, byte_start)",
            "CREATE INDEX chunks_by_line ON content_chunks (entry_id, line_start)",
        ),
    ),
]


def migrate(connection: sqlite3.Connection) -> int:
    """Apply the migrations this database lacks, in order; the resulting version."""
    connection.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    connection.execute("BEGIN IMMEDIATE")  # one process migrates; the others wait, then see it
    try:
        applied = {row[0] for row in connection.execute("SELECT version FROM schema_migrations")}
        for version, name, statements in MIGRATIONS:
            if version in applied:
                continue
            for statement in statements:
                connection.execute(statement)
            connection.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, time.time()),
            )
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return MIGRATIONS[-1][0]
