"""ObservationStore: one SQLite file (WAL) shared by threads and processes.

Each thread gets its own connection. Writes run in ``BEGIN IMMEDIATE`` transactions, so a
process killed mid-write leaves the last committed state; WAL lets readers go on meanwhile.
"""

from __future__ import annotations

import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError, ObservationError, ObservationNotFoundError
from scratchpad.observations import reading, references
from scratchpad.observations.chunks import ChunkSource, prepare
from scratchpad.observations.models import (
    INFO_COLUMNS,
    READ_MODES,
    ObservationEntry,
    ObservationInfo,
    ReadResult,
)
from scratchpad.observations.schema import CHUNK_BYTES, migrate
from scratchpad.observations.summary import (
    serialized_size,
    split_observation,
    summarize,
    synthetic_observation,
)

BUSY_TIMEOUT_S = 10.0
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
    ) -> None:
        self.settings = settings or Settings.load()
        self.chunk_bytes = chunk_bytes
        self.path = Path(path) if path is not None else self.settings.observations_path
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        migrate(self._connection())

    # -- connections ------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_S,
                isolation_level=None,  # transactions are explicit (BEGIN IMMEDIATE)
                check_same_thread=False,  # used by its own thread; close() may come from another
            )
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes
            connection.execute("PRAGMA foreign_keys=ON")
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        connection = self._connection()
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield connection
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def close(self) -> None:
        """Close every connection this store opened (in any thread)."""
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()
        self._local = threading.local()

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
        _check_put(content, turn_id, step_num, tool, metadata, ttl_seconds)
        prepared = prepare(content, self.chunk_bytes)
        metadata_json = _metadata_json(metadata)
        entry_id = secrets.token_hex(8)
        now = time.time()
        expires = now + (
            ttl_seconds if ttl_seconds is not None else self.settings.observation_ttl_s
        )
        with self._write() as connection:
            connection.execute(
                "INSERT INTO entries (id, turn_id, step_num, tool, content_kind, content, "
                "size_bytes, char_count, line_count, summary, metadata, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry_id,
                    turn_id,
                    step_num,
                    tool,
                    prepared.kind,
                    prepared.inline,
                    prepared.size_bytes,
                    prepared.char_count,
                    prepared.line_count,
                    summarize(content if isinstance(content, str) else bytes(content)),
                    metadata_json,
                    now,
                    expires,
                ),
            )
            connection.executemany(
                "INSERT INTO content_chunks (entry_id, seq, byte_start, char_start, line_start, "
                "data) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    (entry_id, c.seq, c.byte_start, c.char_start, c.line_start, c.data)
                    for c in prepared.chunks
                ),
            )
        return entry_id

    def gc(self) -> int:
        """Delete expired entries (and their chunks); how many went."""
        with self._write() as connection:
            cursor = connection.execute("DELETE FROM entries WHERE expires_at <= ?", (time.time(),))
            return cursor.rowcount

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
        if size <= self.settings.observation_threshold_bytes:
            return observation
        content, metadata = split_observation(observation)
        entry_id = self.put(
            content, turn_id=turn_id, step_num=step_num, tool=tool, metadata=metadata
        )
        info = self.info(entry_id)
        return synthetic_observation(
            observation,
            observation_id=entry_id,
            kind=info.kind,
            size_bytes=info.size_bytes,
            summary=info.summary,
            metadata=metadata,
        )

    # -- reading ----------------------------------------------------------------------------
    def info(self, entry_id: str, *, turn_id: str | None = None) -> ObservationInfo:
        """An entry's description; ObservationNotFoundError if unknown, expired or foreign."""
        if not isinstance(entry_id, str) or not entry_id:
            raise InvalidInputError("observation_id must be the id string from an observation")
        row = (
            self._connection()
            .execute(f"SELECT {INFO_COLUMNS} FROM entries WHERE id = ?", (entry_id,))
            .fetchone()
        )
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

    def get(self, entry_id: str, *, turn_id: str | None = None) -> ObservationEntry:
        """The whole entry, content included (for slices, use :meth:`read`)."""
        info = self.info(entry_id, turn_id=turn_id)
        source = ChunkSource(self._connection(), entry_id, self._is_inline(entry_id))
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
        rows = (
            self._connection()
            .execute(
                f"SELECT {INFO_COLUMNS} FROM entries {where} ORDER BY created_at, rowid", params
            )
            .fetchall()
        )
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
        """A slice of an entry: full, head, tail, range, lines or grep (see the mode docs)."""
        if mode not in READ_MODES:
            raise InvalidInputError(f"mode must be one of {', '.join(READ_MODES)}, not {mode!r}")
        _check_int("n", n, minimum=1)
        info = self.info(entry_id, turn_id=turn_id)
        source = ChunkSource(self._connection(), entry_id, self._is_inline(entry_id))
        cap = self.settings.observation_full_cap_chars
        if info.kind == "binary":
            return self._read_binary(source, info, mode, n, start, end, cap)
        total = info.char_count
        if mode == "full":
            if total > cap:
                raise InvalidInputError(
                    f"observation {entry_id!r} has {total} characters, more than full mode "
                    f"returns ({cap}); read it with head, tail, range, lines or grep"
                )
            return reading.read_chars(source, info, 0, total, "full")
        if mode == "head":
            return reading.read_chars(source, info, 0, min(n, cap), "head")
        if mode == "tail":
            return reading.read_chars(source, info, max(0, total - min(n, cap)), total, "tail")
        if mode == "range":
            first, last = _range(start, end, n, cap)
            return reading.read_chars(source, info, first, last, "range")
        if mode == "lines":
            first, last = _line_range(start, end)
            return reading.read_lines(source, info, first, last, cap)
        return self._grep(source, info, pattern, context, max_matches, cap)

    def _read_binary(
        self,
        source: ChunkSource,
        info: ObservationInfo,
        mode: str,
        n: int,
        start: int | None,
        end: int | None,
        cap: int,
    ) -> ReadResult:
        byte_cap = cap * 3 // 4  # base64 grows 4/3: keep the answer within the cap
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
            return reading.read_bytes(source, info, 0, min(n, byte_cap), "head")
        if mode == "tail":
            return reading.read_bytes(source, info, max(0, total - min(n, byte_cap)), total, "tail")
        first, last = _range(start, end, n, byte_cap)
        return reading.read_bytes(source, info, first, last, "range")

    def _grep(
        self,
        source: ChunkSource,
        info: ObservationInfo,
        pattern: str | None,
        context: int,
        max_matches: int,
        cap: int,
    ) -> ReadResult:
        if not isinstance(pattern, str) or not pattern:
            raise InvalidInputError("grep needs a pattern (a regular expression), e.g. 'ERROR'")
        try:
            compiled = re.compile(pattern, re.MULTILINE)
        except re.error as exc:
            raise InvalidInputError(f"invalid regular expression {pattern!r}: {exc}") from exc
        _check_int("context", context, minimum=0, maximum=MAX_CONTEXT_LINES)
        _check_int("max_matches", max_matches, minimum=1, maximum=MAX_GREP_MATCHES)
        found = reading.grep(source, compiled, context, max_matches, cap)
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

    def _is_inline(self, entry_id: str) -> bool:
        row = (
            self._connection()
            .execute("SELECT content IS NOT NULL FROM entries WHERE id = ?", (entry_id,))
            .fetchone()
        )
        return bool(row and row[0])

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


def _check_put(
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
    if not isinstance(turn_id, str) or not turn_id:
        raise InvalidInputError("turn_id must be a non-empty string")
    if step_num is not None:
        _check_int("step_num", step_num, minimum=0)
    if tool is not None and not isinstance(tool, str):
        raise InvalidInputError("tool must be a string (the tool that produced the content)")
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidInputError("metadata must be a dict")
    if ttl_seconds is not None and (
        isinstance(ttl_seconds, bool)
        or not isinstance(ttl_seconds, (int, float))
        or not ttl_seconds > 0
    ):
        raise InvalidInputError(f"ttl_seconds must be a number > 0, not {ttl_seconds!r}")


def _metadata_json(metadata: dict[str, Any] | None) -> str:
    import json

    try:
        return json.dumps(metadata or {}, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"metadata must be JSON-serializable: {exc}") from exc


def _check_int(name: str, value: object, *, minimum: int, maximum: int | None = None) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise InvalidInputError(f"{name} must be an integer {bound}, not {value!r}")


def _range(start: int | None, end: int | None, n: int, cap: int) -> tuple[int, int]:
    """Validated ``start``..``end`` (exclusive); ``end`` defaults to ``start + n``."""
    if start is None:
        raise InvalidInputError("range needs start (and end, exclusive), e.g. start=0, end=2000")
    _check_int("start", start, minimum=0)
    if end is None:
        end = start + n
    _check_int("end", end, minimum=0)
    if end <= start:
        raise InvalidInputError(f"end ({end}) must be greater than start ({start})")
    return start, min(end, start + cap)


def _line_range(start: int | None, end: int | None) -> tuple[int, int]:
    """Validated 1-based inclusive lines; ``end`` defaults to 100 lines from ``start``."""
    first = 1 if start is None else start
    _check_int("start", first, minimum=1)
    last = first + 99 if end is None else end
    _check_int("end", last, minimum=1)
    if last < first:
        raise InvalidInputError(f"end ({last}) must not be before start ({first})")
    return first, last
