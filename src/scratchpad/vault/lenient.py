"""JSON as language models write it, read without guessing.

Models quote with typographic quotes, leave comments and trailing commas, use single quotes,
and sometimes write Python's ``True``/``False``/``None``. The text is translated into strict
JSON piece by piece (string contents are copied, never rewritten) and then read by ``json``;
a failure names the line and column of the original text. Strict JSON passes unchanged.
"""

from __future__ import annotations

import bisect
import json
import re
from typing import Any

from scratchpad.errors import InvalidInputError

SMART_DOUBLE = "\u201c\u201d"  # “ ”
SINGLE = "'\u2018\u2019"  # ' ‘ ’
LOOSE_CLOSERS = {**dict.fromkeys(SMART_DOUBLE, '"' + SMART_DOUBLE), **dict.fromkeys(SINGLE, SINGLE)}
STRICT_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
PLAIN = re.compile(r"[^\"\u201c\u201d'\u2018\u2019/,}\]A-Za-z_$]+")
LITERALS = {"True": "true", "False": "false", "None": "null"}
AFTER_CLOSE = ",:}]/"  # what may follow a closing quote of a loosely quoted string
HINT = "check the quotes, commas and brackets there"


def parse_lenient(text: str) -> Any:
    """The value of ``text`` read as lenient JSON; InvalidInputError (with line and column)
    when it still cannot be read."""
    if not isinstance(text, str):
        raise InvalidInputError(f"expected JSON text, got {type(text).__name__}")
    text = text.removeprefix("\ufeff")
    pieces = _Translator(text).run()
    strict = "".join(piece for piece, _ in pieces)
    try:
        return json.loads(strict, strict=False, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        where = _where(text, _source_offset(pieces, exc.pos, len(text)))
        raise InvalidInputError(f"not valid JSON: {exc.msg} at {where}; {HINT}") from None
    except RecursionError:
        raise InvalidInputError("not valid JSON: nested too deeply") from None


class _Translator:
    """Lenient text → (strict JSON piece, offset in the original text) pairs."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pieces: list[tuple[str, int]] = []
        self.comma: int | None = None  # index of a comma not yet followed by a value

    def emit(self, piece: str, at: int, significant: bool = True) -> None:
        if significant:
            self.comma = None
        self.pieces.append((piece, at))

    def run(self) -> list[tuple[str, int]]:
        text, i = self.text, 0
        while i < len(text):
            i = self._step(i)
        return self.pieces

    def _step(self, i: int) -> int:
        text, char = self.text, self.text[i]
        if char == '"':
            match = STRICT_STRING.match(text, i)
            if match is None:
                raise _error(text, i, "a string is never closed")
            self.emit(match.group(), i)
            return match.end()
        if char in LOOSE_CLOSERS:
            return self._loose_string(i)
        if text.startswith("//", i):
            end = text.find("\n", i)
            return len(text) if end < 0 else end
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise _error(text, i, "a /* comment is never closed")
            return end + 2
        return self._token(i)

    def _token(self, i: int) -> int:
        text, char = self.text, self.text[i]
        if char in "}]":
            if self.comma is not None:
                self.pieces[self.comma] = ("", self.pieces[self.comma][1])  # trailing comma
            self.emit(char, i)
            return i + 1
        if char == ",":
            self.emit(char, i)
            self.comma = len(self.pieces) - 1
            return i + 1
        word = WORD.match(text, i)
        if word is not None:
            self.emit(self._word(word.group(), word.end()), i)
            return word.end()
        plain = PLAIN.match(text, i)
        run = plain.group() if plain is not None else char  # a lone '/' is left to json
        self.emit(run, i, significant=not run.isspace())
        return i + len(run)

    def _word(self, word: str, end: int) -> str:
        """A bare word: a key when a ':' follows, Python's literals in JSON spelling."""
        rest = self.text[end : end + 64].lstrip()
        if rest.startswith(":"):
            return json.dumps(word)
        return LITERALS.get(word, word)

    def _loose_string(self, start: int) -> int:
        """A string opened by a typographic or single quote, as a JSON string."""
        text, closers = self.text, LOOSE_CLOSERS[self.text[start]]
        body: list[str] = []
        i = start + 1
        while i < len(text):
            char = text[i]
            if char == "\\" and i + 1 < len(text):
                escaped = text[i + 1]
                body.append(escaped if escaped in closers and escaped != '"' else text[i : i + 2])
                i += 2
            elif char in closers and self._closes(i + 1):
                self.emit('"' + "".join(body) + '"', start)
                return i + 1
            else:
                body.append('\\"' if char == '"' else char)
                i += 1
        raise _error(text, start, "a string is never closed")

    def _closes(self, i: int) -> bool:
        """Whether a quote ending just before ``i`` can close a loose string: what follows
        is the end or punctuation (so the apostrophe of "don't" stays in the string)."""
        rest = self.text[i : i + 256].lstrip()
        return not rest or rest[0] in AFTER_CLOSE


def _refuse_constant(name: str) -> Any:
    raise InvalidInputError(f"not valid JSON: {name} is not a JSON number; write null or a number")


def _source_offset(pieces: list[tuple[str, int]], pos: int, end: int) -> int:
    """The offset in the original text of offset ``pos`` of the translated text."""
    starts, total = [], 0
    for piece, _ in pieces:
        starts.append(total)
        total += len(piece)
    if pos >= total or not pieces:
        return end
    index = bisect.bisect_right(starts, pos) - 1
    return pieces[index][1] + (pos - starts[index])


def _where(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


def _error(text: str, offset: int, problem: str) -> InvalidInputError:
    return InvalidInputError(f"not valid JSON: {problem} (from {_where(text, offset)}); {HINT}")
