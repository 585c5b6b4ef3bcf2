"""Read modes over one entry's chunks: slices by chars, bytes or lines, and grep.

Every mode streams chunks from the one that holds its start and stops as soon as it has what
it needs; only grep reads the whole entry. Lines are split on ``\\n``; a ``\\r`` before it
(CRLF) is not part of the line.
"""

from __future__ import annotations

import base64
import importlib
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from scratchpad.observations.chunks import ChunkSource
from scratchpad.observations.models import ObservationInfo, ReadMode, ReadResult
from scratchpad.observations.pattern import GrepPattern

GREP_BLOCK_CHARS = 1 << 20
LONG_LINE_CHARS = 500  # a shown grep line longer than this is cut around its match


def read_chars(
    source: ChunkSource, info: ObservationInfo, start: int, end: int, mode: ReadMode
) -> ReadResult:
    """Characters ``start``..``end`` (exclusive) of a text entry."""
    parts: list[str] = []
    needed = end - start
    if needed > 0:
        for chunk, text in source.texts(source.locate("char", start)):
            offset = max(0, start - chunk.char_start)
            piece = text[offset : offset + needed]
            parts.append(piece)
            needed -= len(piece)
            if needed <= 0:
                break
    return ReadResult(info.id, mode, "chars", start, end, info.char_count, "".join(parts))


def read_bytes(
    source: ChunkSource, info: ObservationInfo, start: int, end: int, mode: ReadMode
) -> ReadResult:
    """Bytes ``start``..``end`` (exclusive) of a binary entry, as base64."""
    parts: list[bytes] = []
    needed = end - start
    if needed > 0:
        for chunk in source.chunks(source.locate("byte", start)):
            offset = max(0, start - chunk.byte_start)
            piece = bytes(chunk.data[offset : offset + needed])
            parts.append(piece)
            needed -= len(piece)
            if needed <= 0:
                break
    data = base64.b64encode(b"".join(parts)).decode("ascii")
    return ReadResult(info.id, mode, "bytes", start, end, info.size_bytes, data, "base64")


def read_lines(
    source: ChunkSource, info: ObservationInfo, first: int, last: int, max_chars: int
) -> ReadResult:
    """Lines ``first``..``last`` (1-based, inclusive); at most ``max_chars`` characters."""
    lines: list[str] = []
    budget = max_chars
    notes: list[str] = []
    shown_last = first - 1
    for number, line, length in _lines_from(source, first, max_chars):
        if number > last:
            break
        if length > budget:
            if lines:  # stop before a line that no longer fits
                notes.append(f"stopped after line {shown_last}: the answer is capped")
                break
            line = line[:budget]  # a single line longer than the cap: show its start
            notes.append(f"line {number} is cut at {budget} of its {length} characters")
        lines.append(line)
        budget -= min(length, budget) + 1
        shown_last = number
    return ReadResult(
        info.id,
        "lines",
        "lines",
        first,
        shown_last,
        info.line_count,
        "\n".join(lines),
        note="; ".join(notes),
    )


def _lines_from(source: ChunkSource, first: int, keep: int) -> Iterator[tuple[int, str, int]]:
    """(number, text, full length) of each line from ``first`` on; text cut at ``keep``."""
    skip = first - 1  # newlines to pass before line ``first`` starts
    parts: list[str] = []
    kept = length = 0
    number = first
    started = False
    for chunk, text in source.texts(source.locate("line", skip)):
        position = 0
        if not started:
            for _ in range(skip - chunk.line_start):
                position = text.find("\n", position) + 1
                if position == 0:
                    return  # the content has fewer lines than that
            started = True
        while True:
            newline = text.find("\n", position)
            piece = text[position:] if newline < 0 else text[position:newline]
            length += len(piece)
            if kept < keep:
                parts.append(piece[: keep - kept])
                kept += len(parts[-1])
            if newline < 0:
                break
            yield number, _strip_cr("".join(parts)), length - (1 if piece.endswith("\r") else 0)
            parts, kept, length = [], 0, 0
            number += 1
            position = newline + 1
    if length:
        yield number, _strip_cr("".join(parts)), length


def _strip_cr(line: str) -> str:
    return line[:-1] if line.endswith("\r") else line


@dataclass
class GrepResult:
    lines: list[str]
    matches: int
    shown: int


def grep(
    source: ChunkSource,
    pattern: GrepPattern,
    context: int,
    max_matches: int,
    max_chars: int,
    block_chars: int = GREP_BLOCK_CHARS,
) -> GrepResult:
    """Matching lines as ``number:text`` with ``number-text`` context, like ``grep -n -C``.

    Blocks of complete lines are searched with the regex engine; when the pattern could match
    across a line break (``[^x]``, ``\\s``, ...) or the text has CRLF endings, each line is
    searched on its own instead. Every search draws on the pattern's time budget.
    """
    state = _GrepState(pattern, context, max_matches, max_chars)
    pending: list[str] = []  # text after the last newline seen
    size = 0
    for _, text in source.texts():
        pending.append(text)
        size += len(text)
        if size >= block_chars:
            pending = _feed_complete_lines(state, pending)
            size = sum(map(len, pending))
    tail = "".join(pending)
    if tail:
        state.feed(tail.removesuffix("\n"))  # the final newline ends the last line
    return GrepResult(state.out, state.matches, state.shown)


def _feed_complete_lines(state: _GrepState, pending: list[str]) -> list[str]:
    """Feed the complete lines of ``pending``; what is left (an unfinished line)."""
    last = pending[-1]
    cut = last.rfind("\n")
    if cut < 0:
        return pending  # no line ended yet: keep collecting, without copying
    state.feed("".join(pending[:-1]) + last[:cut])
    return [last[cut + 1 :]]


class _GrepState:
    """Walks complete lines block by block, keeping what context needs across blocks."""

    def __init__(
        self, pattern: GrepPattern, context: int, max_matches: int, max_chars: int
    ) -> None:
        self.pattern = pattern
        self.per_line = can_match_newline(pattern)
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

    def feed(self, body: str) -> None:
        """Process ``body``: complete lines joined by ``\\n`` (no trailing newline)."""
        if self.after_left:  # context owed by a match at the end of the previous block
            self._emit_after(body, 0, self.lines_before + 1)
        counted_to = line_index = 0
        for line_start, line_end in self._matching_lines(body):
            line_index += body.count("\n", counted_to, line_start)
            counted_to = line_start
            self.matches += 1
            if self.shown < self.max_matches and self.out_chars < self.max_chars:
                self._emit_match(body, line_start, line_end, self.lines_before + line_index + 1)
        self.lines_before += body.count("\n") + 1
        if self.context:
            self._remember_tail(body)

    def _matching_lines(self, body: str) -> Iterator[tuple[int, int]]:
        """(start, end) of every line of ``body`` the pattern matches."""
        search = self.pattern.search
        if self.per_line or "\r" in body:
            lines = body.split("\n")
            hits = [i for i, line in enumerate(lines) if search(line, 0, _text_end(line))]
            if not hits:
                return
            lengths = list(accumulate(map(len, lines)))
            for index in hits:
                start = (lengths[index - 1] if index else 0) + index  # + the newlines before
                yield start, start + len(lines[index])
            return
        position = 0
        while position <= len(body) and (found := search(body, position)) is not None:
            start = body.rfind("\n", 0, found.start()) + 1
            end = body.find("\n", found.start())
            end = len(body) if end < 0 else end
            yield start, end
            position = end + 1

    def line_matches(self, body: str, start: int, end: int) -> bool:
        return self.pattern.search(body, start, _line_end(body, start, end)) is not None

    def _emit_match(self, body: str, start: int, end: int, number: int) -> None:
        before: list[tuple[int, str]] = []
        cursor = start
        while len(before) < self.context and number - len(before) - 1 > self.last_emitted:
            wanted = number - len(before) - 1
            if cursor == 0:  # the line is in the previous block
                earlier = [item for item in self.recent if item[0] == wanted]
                if not earlier:
                    break
                before.append(earlier[0])
                continue
            previous = body.rfind("\n", 0, cursor - 1) + 1
            before.append((wanted, body[previous : cursor - 1]))
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
                if self.line_matches(body, start, end):
                    self.after_left = 0  # a match: shown ones write their own context
                    return
                self._write(number, body[start:end], "-")
            self.after_left -= 1
            start, number = end + 1, number + 1

    def _write(self, number: int, line: str, mark: str) -> None:
        if number <= self.last_emitted:
            return
        if self.out and number > self.last_emitted + 1:
            self.out.append("--")
        line = _strip_cr(line)
        if len(line) > LONG_LINE_CHARS:
            line = self._shorten(line, mark == ":")
        self.out.append(f"{number}{mark}{line}")
        self.out_chars += len(line) + 8
        self.last_emitted = number

    def _shorten(self, line: str, is_match: bool) -> str:
        """A window of a long line: around its first match, with the column it starts at."""
        found = self.pattern.search(line) if is_match else None
        begin = max(0, found.start() - LONG_LINE_CHARS // 4) if found else 0
        window = line[begin : begin + LONG_LINE_CHARS]
        prefix = f"[col {begin}] …" if begin else ""
        suffix = f"… [{len(line)} chars in all]" if begin + LONG_LINE_CHARS < len(line) else ""
        return prefix + window + suffix

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


def _line_end(body: str, start: int, end: int) -> int:
    """Where a line's text ends: before a CR that precedes its newline."""
    return end - 1 if end > start and body[end - 1] == "\r" else end


def _text_end(line: str) -> int:
    return len(line) - 1 if line.endswith("\r") else len(line)


def can_match_newline(pattern: GrepPattern) -> bool:
    """Whether any character class of the pattern accepts ``\\n`` (so a search could run
    across lines), judged with ``re``'s parser. Unknown constructs, and syntax only ``regex``
    knows, count as yes: the per-line path is always correct."""
    try:
        constants = importlib.import_module("re._constants")
        parsed = importlib.import_module("re._parser").parse(pattern.pattern, re.MULTILINE)
        dotall = bool(parsed.state.flags & re.DOTALL)  # (?s) at the start
    except (ImportError, AttributeError, re.error, RecursionError):
        return True
    return _accepts_newline(list(parsed), constants, dotall)


def _accepts_newline(items: list[Any], c: Any, dotall: bool) -> bool:
    newline = ord("\n")
    for op, argument in items:
        if op is c.LITERAL:
            if argument == newline:
                return True
        elif op is c.NOT_LITERAL:
            if argument != newline:
                return True
        elif op is c.ANY:
            if dotall:
                return True
        elif op is c.IN:
            if _set_accepts_newline(argument, c):
                return True
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
            if _accepts_newline(list(argument[2]), c, dotall):
                return True
        elif op is c.SUBPATTERN:  # (group, flags added, flags removed, items): (?s:...)
            inner = (dotall or bool(argument[1] & re.DOTALL)) and not argument[2] & re.DOTALL
            if _accepts_newline(list(argument[-1]), c, inner):
                return True
        elif op is c.BRANCH:
            if any(_accepts_newline(list(branch), c, dotall) for branch in argument[1]):
                return True
        elif op in (c.AT, c.GROUPREF):
            continue
        else:
            return True  # lookarounds, conditionals, atomic groups...: assume it can
    return False


def _set_accepts_newline(items: list[tuple[Any, Any]], c: Any) -> bool:
    newline = ord("\n")
    negate = False
    found = False
    for op, argument in items:
        if op is c.NEGATE:
            negate = True
        elif op is c.LITERAL:
            found |= argument == newline
        elif op is c.RANGE:
            found |= argument[0] <= newline <= argument[1]
        elif op is c.CATEGORY:
            found |= argument in (
                c.CATEGORY_SPACE,
                c.CATEGORY_NOT_DIGIT,
                c.CATEGORY_NOT_WORD,
                c.CATEGORY_LINEBREAK,
            )
        else:
            return True
    return found != negate
