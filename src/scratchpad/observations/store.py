"""ObservationStore: one SQLite file (WAL) shared by threads and processes.

Operations borrow pooled connections. Writes run in ``BEGIN IMMEDIATE`` transactions, so a
process killed mid-write leaves the last committed state; every read runs in one snapshot, so
a concurrent gc can never hand back half an entry. A write that finds the disk full raises
DiskFullError (HTTP 507) and stores nothing; the same write works once space is freed.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError, ObservationError, ObservationNotFoundError
from scratchpad.fsutil import private_dir, touch_private
from scratchpad.observations import reading, references
from scratchpad.observations.chunks import ChunkSource, prepare
from scratchpad.observations.connections import ConnectionPool
from scratchpad.observations.models import (
    INFO_COLUMNS,
    READ_MODES,
    ObservationEntry,
    ObservationInfo,
    ReadResult,
)
from scratchpad.observations.pattern import GrepPattern
from scratchpad.observations.rewrite import RescrubCounts, rescrub_entries
from scratchpad.observations.schema import CHUNK_BYTES, migrate
from scratchpad.observations.summary import (
    serialized_size,
    split_observation,
    storable,
    summarize,
    synthetic_observation,
)
from scratchpad.observations.validation import (
    char_range,
    check_int,
    check_put,
    line_range,
    metadata_json,
)
from scratchpad.scrub import Scrubber, scrubber

MAX_CONTEXT_LINES = 20
MAX_GREP_MATCHES = 1000


class ObservationStore:
    """Stores large observations and reads them back in slices. Safe across threads."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        settings: Settings | None = None,
        chunk_bytes: int = CHUNK_BYTES,
        grep_block_chars: int = reading.GREP_BLOCK_CHARS,
    ) -> None:
        if chunk_bytes < 4:
            raise InvalidInputError("chunk_bytes must be at least 4 (one UTF-8 character)")
        self.settings = settings or Settings.load()
        self.path = Path(path) if path is not None else self.settings.observations_path
        self.chunk_bytes = chunk_bytes
        self.grep_block_chars = grep_block_chars
        private_dir(self.path.parent)
        touch_private(self.path)  # SQLite gives its -wal and -shm files the same mode
        self._pool = ConnectionPool(self.path)
        with self._pool.connection() as connection:
            migrate(connection)

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> ObservationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ----------------------------------------------------------------------------
    def put(
        self,
        content: str | bytes,
        *,
        turn_id: str,
        step_num: int | None = None,
        tool: str | None = None,
        metadata: dict[str, Any] | None = None,
        ttl_seconds: float | None = None,
    ) -> str:
        """Store ``content`` (text, or bytes for binary) for a turn; the new entry's id."""
        return self._insert(content, turn_id, step_num, tool, metadata, ttl_seconds).id

    def _insert(
        self,
        content: str | bytes,
        turn_id: str,
        step_num: int | None,
        tool: str | None,
        metadata: dict[str, Any] | None,
        ttl_seconds: float | None,
    ) -> ObservationInfo:
        """Write one entry; its description, built here rather than read back. Text and
        metadata are scrubbed of secrets first (bytes are stored as they are)."""
        check_put(content, turn_id, step_num, tool, metadata, ttl_seconds)
        if isinstance(content, str):
            content = scrubber().scrub(content)
        if metadata:
            metadata = scrubber().scrub_data(metadata)
        prepared = prepare(content, self.chunk_bytes)
        metadata_text = metadata_json(metadata)
        now = time.time()
        ttl = ttl_seconds if ttl_seconds is not None else self.settings.observation_ttl_s
        summary = storable(summarize(content if isinstance(content, str) else bytes(content)))
        info = ObservationInfo(
            secrets.token_hex(8),
            turn_id,
            step_num,
            tool,
            prepared.kind,
            prepared.size_bytes,
            prepared.char_count,
            prepared.line_count,
            summary,
            json.loads(metadata_text),
            now,
            now + ttl,
        )
        with self._pool.writing() as connection:
            connection.execute(
                f"INSERT INTO entries ({INFO_COLUMNS}, content) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    info.id,
                    turn_id,
                    step_num,
                    tool,
                    info.kind,
                    info.size_bytes,
                    info.char_count,
                    info.line_count,
                    summary,
                    metadata_text,
                    now,
                    info.expires_at,
                    prepared.inline,
                ),
            )
            connection.executemany(
                "INSERT INTO content_chunks (entry_id, seq, byte_start, char_start, line_start, "
                "data) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    (info.id, c.seq, c.byte_start, c.char_start, c.line_start, c.data)
                    for c in prepared.chunks
                ),
            )
        return info

    def gc(self) -> int:
        """Delete expired entries (and their chunks); how many went."""
        with self._pool.writing() as connection:
            cursor = connection.execute("DELETE FROM entries WHERE expires_at <= ?", (time.time(),))
            return cursor.rowcount

    def rescrub(self, scrub: Scrubber | None = None) -> RescrubCounts:
        """Scrub every stored text entry again (a secret was added or rotated): an entry whose
        content or metadata changes is rewritten in one transaction, keeping its id, turn and
        expiry. Runs for as long as the store is large: call it on a worker thread."""
        return rescrub_entries(self._pool, scrub or scrubber(), self.chunk_bytes)

    def offload(
        self,
        observation: dict[str, Any],
        *,
        turn_id: str,
        step_num: int | None = None,
        tool: str | None = None,
    ) -> dict[str, Any]:
        """The observation itself when small; else store it and return the synthetic one."""
        if not isinstance(observation, dict):
            raise InvalidInputError("an observation must be a dict, e.g. {'ok': True, ...}")
        size = serialized_size(observation)
        threshold = self.settings.observation_threshold_bytes
        if size <= threshold:
            return observation
        content, metadata = split_observation(observation, threshold)
        metadata = scrubber().scrub_data(metadata)  # it goes back to the model too
        stored_metadata = {"ok": observation["ok"], **metadata} if "ok" in observation else metadata
        info = self._insert(content, turn_id, step_num, tool, stored_metadata, None)
        return synthetic_observation(
            observation,
            observation_id=info.id,
            kind=info.kind,
            size_bytes=info.size_bytes,
            summary=info.summary,
            metadata=metadata,
        )

    # -- reading ----------------------------------------------------------------------------
    def info(self, entry_id: str, *, turn_id: str | None = None) -> ObservationInfo:
        """An entry's description; ObservationNotFoundError if unknown, expired or foreign."""
        with self._pool.reading() as connection:
            return _info(connection, entry_id, turn_id)

    def get(self, entry_id: str, *, turn_id: str | None = None) -> ObservationEntry:
        """The whole entry, content included (for slices, use :meth:`read`)."""
        with self._pool.reading() as connection:
            info = _info(connection, entry_id, turn_id)
            source = ChunkSource(connection, entry_id, _is_inline(connection, entry_id))
            data = b"".join(bytes(chunk.data) for chunk in source.chunks())
        content = data.decode("utf-8", "surrogatepass") if info.kind == "text" else data
        return ObservationEntry(info, content)

    def list_for_turn(self, turn_id: str) -> list[ObservationInfo]:
        """The live entries of one turn, oldest first."""
        return self._list("WHERE turn_id = ? AND expires_at > ?", (turn_id, time.time()))

    def list_all(self) -> list[ObservationInfo]:
        """Every entry still stored (expired ones too, until gc), oldest first."""
        return self._list("", ())

    def _list(self, where: str, params: tuple[Any, ...]) -> list[ObservationInfo]:
        with self._pool.reading() as connection:
            rows = connection.execute(
                f"SELECT {INFO_COLUMNS} FROM entries {where} ORDER BY created_at, rowid", params
            ).fetchall()
        return [ObservationInfo.from_row(row) for row in rows]

    def read(
        self,
        entry_id: str,
        mode: str = "head",
        n: int = 2000,
        start: int | None = None,
        end: int | None = None,
        pattern: str | None = None,
        context: int = 0,
        max_matches: int = 50,
        *,
        turn_id: str | None = None,
    ) -> ReadResult:
        """A slice of an entry: full, head, tail, range, lines or grep (see the README)."""
        if mode not in READ_MODES:
            raise InvalidInputError(f"mode must be one of {', '.join(READ_MODES)}, not {mode!r}")
        check_int("n", n, minimum=1)
        with self._pool.reading() as connection:
            info = _info(connection, entry_id, turn_id)
            source = ChunkSource(connection, entry_id, _is_inline(connection, entry_id))
            if info.kind == "binary":
                return self._read_binary(source, info, mode, n, start, end)
            return self._read_text(source, info, mode, n, start, end, pattern, context, max_matches)

    def _read_text(
        self,
        source: ChunkSource,
        info: ObservationInfo,
        mode: str,
        n: int,
        start: int | None,
        end: int | None,
        pattern: str | None,
        context: int,
        max_matches: int,
    ) -> ReadResult:
        cap = self.settings.observation_full_cap_chars
        total = info.char_count
        if mode == "full":
            if total > cap:
                raise InvalidInputError(
                    f"observation {info.id!r} has {total} characters, more than full mode "
                    f"returns ({cap}); read it with head, tail, range, lines or grep"
                )
            return reading.read_chars(source, info, 0, total, "full")
        if mode == "head":
            return reading.read_chars(source, info, 0, min(n, cap, total), "head")
        if mode == "tail":
            return reading.read_chars(source, info, max(0, total - min(n, cap)), total, "tail")
        if mode == "range":
            first, last = char_range(start, end, n, total, cap)
            return reading.read_chars(source, info, first, last, "range")
        if mode == "lines":
            first, last = line_range(start, end, info.line_count)
            return reading.read_lines(source, info, first, last, cap)
        compiled = GrepPattern(pattern, self.settings.observation_grep_timeout_s)
        check_int("context", context, minimum=0, maximum=MAX_CONTEXT_LINES)
        check_int("max_matches", max_matches, minimum=1, maximum=MAX_GREP_MATCHES)
        found = reading.grep(source, compiled, context, max_matches, cap, self.grep_block_chars)
        return ReadResult(
            info.id,
            "grep",
            "lines",
            1,
            info.line_count,
            info.line_count,
            "\n".join(found.lines),
            matches=found.matches,
            shown=found.shown,
        )

    def _read_binary(
        self,
        source: ChunkSource,
        info: ObservationInfo,
        mode: str,
        n: int,
        start: int | None,
        end: int | None,
    ) -> ReadResult:
        byte_cap = self.settings.observation_full_cap_chars * 3 // 4  # base64 grows by 4/3
        total = info.size_bytes
        if mode in ("lines", "grep"):
            raise InvalidInputError(
                f"observation {info.id!r} is binary: read it with full, head, tail or range "
                "(byte offsets, answered in base64)"
            )
        if mode == "full":
            if total > byte_cap:
                raise InvalidInputError(
                    f"observation {info.id!r} has {total} bytes, more than full mode returns "
                    f"({byte_cap}); read it with head, tail or range"
                )
            return reading.read_bytes(source, info, 0, total, "full")
        if mode == "head":
            return reading.read_bytes(source, info, 0, min(n, byte_cap, total), "head")
        if mode == "tail":
            return reading.read_bytes(source, info, max(0, total - min(n, byte_cap)), total, "tail")
        first, last = char_range(start, end, n, total, byte_cap, unit="bytes")
        return reading.read_bytes(source, info, first, last, "range")

    # -- references -------------------------------------------------------------------------
    def resolve_references(self, args: Any, *, turn_id: str) -> Any:
        """``args`` with every ``{{stepN.field}}`` replaced by step N's stored value."""

        def lookup(step: int, field: str) -> Any:
            return self._step_field(turn_id, step, field)

        return references.resolve(args, lookup)

    def _step_field(self, turn_id: str, step: int, field: str) -> Any:
        entries = self.list_for_turn(turn_id)
        matching = [info for info in entries if info.step_num == step]
        if not matching:
            steps = sorted({i.step_num for i in entries if i.step_num is not None})
            listed = ", ".join(map(str, steps)) or "none"
            raise ObservationError(
                f"{{{{step{step}.{field}}}}}: no stored observation for step {step} of this "
                f"turn (steps with stored observations: {listed})"
            )
        info = matching[-1]
        if field == "content":
            return self.get(info.id).content
        fields = {
            "observation_id": info.id,
            "size_bytes": info.size_bytes,
            "kind": info.kind,
            "summary": info.summary,
            **info.metadata,
        }
        if field not in fields:
            raise ObservationError(
                f"{{{{step{step}.{field}}}}}: step {step} has no field {field!r}; "
                f"fields: content, {', '.join(sorted(fields))}"
            )
        return fields[field]


def _info(connection: sqlite3.Connection, entry_id: str, turn_id: str | None) -> ObservationInfo:
    if not isinstance(entry_id, str) or not entry_id:
        raise InvalidInputError("observation_id must be the id string from an observation")
    row = connection.execute(
        f"SELECT {INFO_COLUMNS} FROM entries WHERE id = ?", (entry_id,)
    ).fetchone()
    if row is None:
        raise ObservationNotFoundError(
            f"no observation {entry_id!r}: use an observation_id from this turn's "
            "offloaded observations"
        )
    info = ObservationInfo.from_row(row)
    if info.expires_at <= time.time():
        expired = datetime.fromtimestamp(info.expires_at, UTC).isoformat(timespec="seconds")
        raise ObservationNotFoundError(
            f"observation {entry_id!r} expired at {expired}; run the tool again to get it"
        )
    if turn_id is not None and info.turn_id != turn_id:
        raise ObservationNotFoundError(
            f"observation {entry_id!r} belongs to another turn; only this turn's "
            "observations can be read"
        )
    return info


def _is_inline(connection: sqlite3.Connection, entry_id: str) -> bool:
    row = connection.execute(
        "SELECT content IS NOT NULL FROM entries WHERE id = ?", (entry_id,)
    ).fetchone()
    return bool(row and row[0])
