"""Content on disk: split into chunks when written, located and streamed when read.

Text is stored as UTF-8 and split only on character boundaries, so every chunk decodes on its
own. Each chunk knows where it starts in bytes, characters and lines; the indexes on those
columns find the chunk holding any offset in O(log n), so reading a slice costs the same in a
1 MB and in a 100 MB entry.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from scratchpad.observations.schema import CHUNK_BYTES

TEXT_ENCODING = "utf-8"
TEXT_ERRORS = "surrogatepass"  # lone surrogates in tool output survive the round trip
Unit = Literal["byte", "char", "line"]


@dataclass(frozen=True, slots=True)
class Chunk:
    seq: int
    byte_start: int
    char_start: int
    line_start: int  # newlines before this chunk
    data: bytes | memoryview


@dataclass(frozen=True, slots=True)
class PreparedContent:
    """Content ready to insert: inline (one small chunk) or a list of chunks."""

    kind: Literal["text", "binary"]
    inline: bytes | None
    chunks: list[Chunk]
    size_bytes: int
    char_count: int
    line_count: int


def prepare(
    content: str | bytes | bytearray | memoryview, chunk_bytes: int = CHUNK_BYTES
) -> PreparedContent:
    """Content split for storage: inline when it fits one chunk of ``chunk_bytes``."""
    if isinstance(content, str):
        return _prepare_text(content, chunk_bytes)
    raw = bytes(content)
    chunks = [
        Chunk(seq, start, start, 0, memoryview(raw)[start : start + chunk_bytes])
        for seq, start in enumerate(range(0, len(raw), chunk_bytes))
    ]
    inline = raw if len(raw) <= chunk_bytes else None
    return PreparedContent(
        "binary", inline, [] if inline is not None else chunks, len(raw), len(raw), 0
    )


def _prepare_text(text: str, chunk_bytes: int) -> PreparedContent:
    raw = text.encode(TEXT_ENCODING, TEXT_ERRORS)
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    if len(raw) <= chunk_bytes:
        return PreparedContent("text", raw, [], len(raw), len(text), lines)
    ascii_only = text.isascii()
    view = memoryview(raw)
    chunks: list[Chunk] = []
    start = chars = newlines = 0
    while start < len(raw):
        end = min(start + chunk_bytes, len(raw))
        while end < len(raw) and raw[end] & 0xC0 == 0x80:  # never cut a character in two
            end -= 1
        piece = view[start:end]
        chunks.append(Chunk(len(chunks), start, chars, newlines, piece))
        chars += len(piece) if ascii_only else len(bytes(piece).decode(TEXT_ENCODING, TEXT_ERRORS))
        newlines += bytes(piece).count(b"\n")
        start = end
    return PreparedContent("text", None, chunks, len(raw), len(text), lines)


class TextChunker:
    """Text given piece by piece, cut exactly where :func:`prepare` cuts the whole of it (so a
    rewritten entry is laid out as a new one would be), without holding all of it at once."""

    def __init__(self, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.chunk_bytes = chunk_bytes
        self._buffer = bytearray()
        self._next = Chunk(0, 0, 0, 0, b"")  # where the next chunk starts
        self.char_count = self.newlines = 0
        self.last_char = ""

    def feed(self, text: str) -> list[Chunk]:
        """Take ``text``; the chunks it completed (the last one is only known at the end)."""
        if not text:
            return []
        buffer = self._buffer
        buffer += text.encode(TEXT_ENCODING, TEXT_ERRORS)
        self.char_count += len(text)
        self.newlines += text.count("\n")
        self.last_char = text[-1]
        done = []
        start = 0
        while len(buffer) - start > self.chunk_bytes:
            end = start + self.chunk_bytes
            while buffer[end] & 0xC0 == 0x80:  # never cut a character in two
                end -= 1
            done.append(self._chunk(bytes(buffer[start:end])))
            start = end
        del buffer[:start]
        return done

    def finish(self) -> PreparedContent:
        """The layout of the whole text: inline, or the chunks :meth:`feed` has not handed
        out yet (the last one)."""
        lines = self.newlines + (1 if self.last_char not in ("", "\n") else 0)
        size = self._next.byte_start + len(self._buffer)
        if self._next.seq == 0 and len(self._buffer) <= self.chunk_bytes:
            inline = bytes(self._buffer)
            return PreparedContent("text", inline, [], size, self.char_count, lines)
        rest = [self._chunk(bytes(self._buffer))] if self._buffer else []
        self._buffer.clear()
        return PreparedContent("text", None, rest, size, self.char_count, lines)

    def _chunk(self, piece: bytes) -> Chunk:
        at = self._next
        chars = len(piece.decode(TEXT_ENCODING, TEXT_ERRORS))
        self._next = Chunk(
            at.seq + 1,
            at.byte_start + len(piece),
            at.char_start + chars,
            at.line_start + piece.count(b"\n"),
            b"",
        )
        return Chunk(at.seq, at.byte_start, at.char_start, at.line_start, piece)


class ChunkSource:
    """Reads one entry's content chunk by chunk (inline content is a single chunk 0)."""

    def __init__(self, connection: sqlite3.Connection, entry_id: str, inline: bool) -> None:
        self._connection = connection
        self._entry_id = entry_id
        self._inline = inline

    def locate(self, unit: Unit, offset: int) -> int:
        """The seq of the chunk holding ``offset`` (for lines: the chunk where that many
        newlines have been passed)."""
        if self._inline or offset <= 0:
            return 0
        column = {"byte": "byte_start", "char": "char_start", "line": "line_start"}[unit]
        comparison = "<" if unit == "line" else "<="
        row = self._connection.execute(
            f"SELECT seq FROM content_chunks WHERE entry_id = ? AND {column} {comparison} ? "
            f"ORDER BY {column} DESC, seq DESC LIMIT 1",
            (self._entry_id, offset),
        ).fetchone()
        return int(row[0]) if row else 0

    def chunks(self, from_seq: int = 0) -> Iterator[Chunk]:
        """Chunks in order from ``from_seq``, fetched one at a time (never all at once)."""
        if self._inline:
            row = self._connection.execute(
                "SELECT content FROM entries WHERE id = ?", (self._entry_id,)
            ).fetchone()
            if row is not None and from_seq == 0:
                yield Chunk(0, 0, 0, 0, bytes(row[0]))
            return
        seq = from_seq
        while True:
            row = self._connection.execute(
                "SELECT seq, byte_start, char_start, line_start, data FROM content_chunks "
                "WHERE entry_id = ? AND seq = ?",
                (self._entry_id, seq),
            ).fetchone()
            if row is None:
                return
            yield Chunk(row[0], row[1], row[2], row[3], bytes(row[4]))
            seq += 1

    def texts(self, from_seq: int = 0) -> Iterator[tuple[Chunk, str]]:
        for chunk in self.chunks(from_seq):
            yield chunk, bytes(chunk.data).decode(TEXT_ENCODING, TEXT_ERRORS)
