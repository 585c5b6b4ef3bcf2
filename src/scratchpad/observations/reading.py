"""Read modes over one entry's chunks: slices by chars, bytes or lines, and grep.

Every mode streams chunks from the one that holds its start and stops as soon as it has what
it needs; only grep reads the whole entry, and it searches large blocks with the regex engine
instead of looping over lines in Python.
"""

from __future__ import annotations

import base64
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from scratchpad.observations.chunks import ChunkSource
from scratchpad.observations.models import ObservationInfo, ReadResult

GREP_BLOCK_CHARS = 1 << 20
GREP_LINE_CHARS = 500  # a shown line longer than this is cut (minified JSON, ...)


def read_chars(
    source: ChunkSource, info: ObservationInfo, start: int, end: int, mode: str
) -> ReadResult:
    """Characters ``start``..``end`` (exclusive) of a text entry."""
    end = min(end, info.char_count)
    start = min(start, end)
    parts: list[str] = []
    needed = end - start
    for chunk, text in source.texts(source.locate("char", start)):
        offset = max(0, start - chunk.char_start)
        piece = text[offset : offset + needed]
        parts.append(piece)
        needed -= len(piece)
        if needed <= 0:
            break
    return ReadResult(info.id, mode, "chars", start, end, info.char_count, "".join(parts))  # type: ignore[arg-type]


def read_bytes(
    source: ChunkSource, info: ObservationInfo, start: int, end: int, mode: str
) -> ReadResult:
    """Bytes ``start``..``end`` (exclusive) of a binary entry, as base64."""
    end = min(end, info.size_bytes)
    start = min(start, end)
    parts: list[bytes] = []
    needed = end - start
    for chunk in source.chunks(source.locate("byte", start)):
        offset = max(0, start - chunk.byte_start)
        piece = bytes(chunk.data[offset : offset + needed])
        parts.append(piece)
        needed -= len(piece)
        if needed <= 0:
            break
    data = base64.b64encode(b"".join(parts)).decode("ascii")
    return ReadResult(info.id, mode, "bytes", start, end, info.size_bytes, data, "base64")  # type: ignore[arg-type]


def read_lines(
    source: ChunkSource, info: ObservationInfo, first: int, last: int, max_chars: int
) -> ReadResult:
    """Lines ``first``..``last`` (1-based, inclusive), at most ``max_chars`` characters."""
    last = min(last, info.line_count)
    lines: list[str] = []
    size = 0
    note = ""
    for number, line in _lines_from(source, first):
        if number > last:
            break
        if size + len(line) > max_chars:
            note = f"stopped at line {number - 1}: more would exceed {max_chars} characters"
            last = number - 1
            break
        lines.append(line)
        size += len(line) + 1
    shown_last = max(last, first - 1)
    return ReadResult(
        info.id, "lines", "lines", first, shown_last, info.line_count, "\n".join(lines), note=note
    )


def _lines_from(source: ChunkSource, first: int) -> Iterator[tuple[int, str]]:
    """(number, text) of each line from line ``first`` on, across chunk boundaries."""
    skip = first - 1  # newlines to pass before line ``first`` starts
    carry = ""
    number = first
    started = False
    for chunk, text in source.texts(source.locate("line", skip)):
        if not started:
            position = 0
            for _ in range(skip - chunk.line_start):
                position = text.find("\n", position) + 1
                if position == 0:
                    return  # the content has fewer lines than that
            text = text[position:]
            started = True
        text = carry + text
        pieces = text.split("\n")
        carry = pieces.pop()
        for piece in pieces:
            yield number, piece
            number += 1
    if carry:
        yield number, carry


@dataclass
class GrepResult:
    lines: list[str]
    matches: int
    shown: int


def grep(
    source: ChunkSource,
    pattern: re.Pattern[str],
    context: int,
    max_matches: int,
    max_chars: int,
    block_chars: int = GREP_BLOCK_CHARS,
) -> GrepResult:
    """Matching lines as ``number:text`` with ``number-text`` context, like ``grep -n -C``."""
    state = _GrepState(pattern, context, max_matches, max_chars)
    carry = ""
    block: list[str] = []
    size = 0
    for _, text in source.texts():
        block.append(text)
        size += len(text)
        if size >= block_chars:
            carry = state.feed(carry + "".join(block))
            block, size = [], 0
    carry = state.feed(carry + "".join(block))
    if carry:
        state.feed(carry + "\n")
    return GrepResult(state.out, state.matches, state.shown)


class _GrepState:
    """Walks complete lines block by block, keeping what context needs across blocks."""

    def __init__(
        self, pattern: re.Pattern[str], context: int, max_matches: int, max_chars: int
    ) -> None:
        self.pattern = pattern
        self.context = context
        self.max_matches = max_matches
        self.max_chars = max_chars
        self.out: list[str] = []
        self.out_chars = 0
        self.matches = 0
        self.shown = 0
        self.lines_before = 0  # complete lines in earlier blocks
        self.last_emitted = 0  # number of the last line written to out
        self.recent: deque[tuple[int, str]] = deque(maxlen=context or 1)
        self.after_left = 0  # context lines still owed after the last match

    def feed(self, text: str) -> str:
        """Process the complete lines of ``text``; return the unfinished last line."""
        cut = text.rfind("\n")
        if cut < 0:
            return text
        body, rest = text[:cut], text[cut + 1 :]
        self._scan(body)
        self.lines_before += body.count("\n") + 1
        if self.context:
            self._remember_tail(body)
        return rest

    def _scan(self, body: str) -> None:
        search = self.pattern.search
        position = 0
        counted_to = 0
        line_index = 0  # lines of body before counted_to
        if self.after_left:  # context owed by a match at the end of the previous block
            self._emit_after(body, 0, self.lines_before + 1)
        while position <= len(body):
            found = search(body, position)
            if found is None:
                break
            line_start = body.rfind("\n", 0, found.start()) + 1
            line_end = body.find("\n", found.start())
            line_end = len(body) if line_end < 0 else line_end
            if search(body, line_start, line_end) is None:
                position = line_end + 1  # the match ran across a line break: not a line match
                continue
            line_index += body.count("\n", counted_to, line_start)
            counted_to = line_start
            self.matches += 1
            if self.shown < self.max_matches and self.out_chars < self.max_chars:
                self._emit_match(body, line_start, line_end, self.lines_before + line_index + 1)
            position = line_end + 1

    def _emit_match(self, body: str, start: int, end: int, number: int) -> None:
        before: list[tuple[int, str]] = []
        cursor = start
        while len(before) < self.context and number - len(before) - 1 > self.last_emitted:
            if cursor == 0:
                wanted = number - len(before) - 1
                before.extend(item for item in reversed(self.recent) if item[0] == wanted)
                if not before or before[-1][0] != wanted:
                    break
                continue
            previous = body.rfind("\n", 0, cursor - 1) + 1
            before.append((number - len(before) - 1, body[previous : cursor - 1]))
            cursor = previous
        for line_number, line in reversed(before):
            self._write(line_number, line, "-")
        self._write(number, body[start:end], ":")
        self.shown += 1
        self.after_left = self.context
        self._emit_after(body, end + 1, number + 1)

    def _emit_after(self, body: str, start: int, number: int) -> None:
        while self.after_left and start <= len(body):
            end = body.find("\n", start)
            end = len(body) if end < 0 else end
            if number > self.last_emitted:
                if self.search_line(body, start, end):
                    self.after_left = 0  # a match: shown ones write their own context
                    return
                self._write(number, body[start:end], "-")
            self.after_left -= 1
            start, number = end + 1, number + 1

    def search_line(self, body: str, start: int, end: int) -> bool:
        return self.pattern.search(body, start, end) is not None

    def _write(self, number: int, line: str, mark: str) -> None:
        if number <= self.last_emitted:
            return
        if self.out and number > self.last_emitted + 1:
            self.out.append("--")
        if len(line) > GREP_LINE_CHARS:
            line = line[:GREP_LINE_CHARS] + f"… [{len(line) - GREP_LINE_CHARS} more chars]"
        self.out.append(f"{number}{mark}{line}")
        self.out_chars += len(line) + 8
        self.last_emitted = number

    def _remember_tail(self, body: str) -> None:
        end = len(body)
        number = self.lines_before
        kept: list[tuple[int, str]] = []
        while len(kept) < self.context and end >= 0:
            start = body.rfind("\n", 0, end) + 1
            kept.append((number, body[start:end]))
            number -= 1
            if start == 0:
                break
            end = start - 1
        self.recent.extend(reversed(kept))
