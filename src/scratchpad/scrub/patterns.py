"""The compiled search over every form of every known secret (built once per change).

One regular expression finds literals: each form's pieces (the form itself, or its prefix and
suffix anchors) searched for from their least common character (the engine skips in C the
positions where no literal can start; a literal that starts with a lowercase letter would be
tried at every word), plus the shapes of well-known API keys, caught even when nobody
registered them. A match is checked against the piece it belongs to, and an anchor is
extended in the text as far as the text agrees with its form, across line breaks (wrapped
base64, an escaped ``\\n``).

For streams and cuts, two more expressions are compiled on first use: the pieces from their
start (``regex``'s partial matching says whether the end of a text could begin one), and the
ends of forms reversed (whether the start of a text could end one).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any, Literal

import regex

from scratchpad.scrub.forms import Form

REDACTED = "[REDACTED]"  # what stands for a secret value in scrubbed text
HELD_WORD_CHARS = 256  # a trailing run of key characters held back by a stream, at most
CONTINUED_CHARS = 4  # characters of a form that must follow a line break to cross it
SEARCHED_CHARS = 6  # a piece is searched for by at least this many of its last characters
SEPARATORS = ("\r\n", "\n", "\\r\\n", "\\n")  # line breaks inside a printed form

# Key shapes caught whether registered or not (a letter or digit before them is no start), as
# (literal start, the rest as a pattern): the starts go into the trie of known forms.
KEY_SHAPES = (
    ("sk-ant-", r"[A-Za-z0-9_\-]{16,}"),
    ("sk-", r"(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("AIza", r"[0-9A-Za-z_\-]{30,}"),
    ("gh", r"[pousr]_[A-Za-z0-9]{30,}"),
    ("github_pat_", r"[A-Za-z0-9_]{22,}"),
    ("xox", r"[abpr]-[A-Za-z0-9\-]{10,}"),
    ("AKIA", r"[0-9A-Z]{16}"),
    ("ASIA", r"[0-9A-Z]{16}"),
)
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_COMMON_MARKS = frozenset(".,:;-_/()[]='\"")  # punctuation of ordinary output
_LETTERS = {letter: 26 - rank for rank, letter in enumerate("etaoinsrhldcumfpgwybvkxjqz")}

Kind = Literal["whole", "head", "tail"]  # how a piece stands for its form
Span = tuple[int, int, str]  # start, end, replacement


class Patterns:
    """The search over ``forms`` (each with its replacement in ``labels``), read by any
    thread."""

    def __init__(self, forms: Iterable[Form], labels: dict[str, str]) -> None:
        self.labels = labels
        self.pieces: dict[str, list[tuple[Form, Kind]]] = {}
        self.literals: dict[str, list[tuple[Form, Kind, int]]] = {}
        longest = 0
        for form in forms:
            longest = max(longest, len(form.text))
            kinds: list[Kind] = []
            if form.head:
                kinds.append("head")
            if form.tail:
                kinds.append("tail")
            for kind in kinds or ["whole"]:
                piece = piece_of(form, kind)
                skip = rare_start(piece)
                self.pieces.setdefault(piece, []).append((form, kind))
                self.literals.setdefault(piece[skip:], []).append((form, kind, skip))
        self.search = re.compile(trie_pattern(self.literals, KEY_SHAPES))
        self.window = max(longest + longest // 8, HELD_WORD_CHARS)  # line breaks inside
        self._lock = threading.Lock()
        self._partial: regex.Pattern[str] | None = None
        self._literals_only: re.Pattern[str] | None = None  # known forms, no key shapes
        self._reverse: tuple[regex.Pattern[str], dict[str, list[str]]] | None = None

    def spans(self, text: str) -> list[Span]:
        """Every secret in ``text``, left to right."""
        spans: list[Span] = []
        position = done = 0
        search = self.search.search
        while (match := search(text, position)) is not None:
            found = self._resolve(match, text)
            if found is None:
                position = match.start() + 1
                continue
            start, end, label = found
            spans.append((max(start, done), end, label))
            position = done = end
        return spans

    def _resolve(self, match: re.Match[str], text: str) -> Span | None:
        """The span and label a match stands for: a key shape (none when it continues a
        word), or the widest span of the forms its literal is part of."""
        start, end = match.span()
        candidates = self.literals.get(match.group())
        if candidates is None:
            if start and text[start - 1] in _KEY_CHARS:
                return None
            return self._known_in(text, start, end) or (start, end, REDACTED)
        best = (start, end)
        label = ""
        for form, kind, skip in candidates:
            begin = start - skip  # the piece begins before the literal searched for
            if skip and (begin < 0 or not text.startswith(piece_of(form, kind)[:skip], begin)):
                continue
            if kind == "head":
                span = (begin, extend_forward(text, begin, end, form.text)[0])
            elif kind == "tail":
                span = (extend_backward(text, begin, end, form.text), end)
            else:
                span = (begin, end)
            if not label or span[1] - span[0] > best[1] - best[0]:
                best, label = span, self.labels[form.text]
        return (best[0], best[1], label) if label else None

    def _known_in(self, text: str, start: int, end: int) -> Span | None:
        """A known secret within the key shape found at ``start:end`` (a vault's API key is
        one): its label, over both spans, so it is named by its variable, not ``[REDACTED]``."""
        if not self.literals:
            return None
        if self._literals_only is None:
            self._literals_only = re.compile(trie_pattern(self.literals))
        stop = min(len(text), end + self.window)
        for match in self._literals_only.finditer(text, start, stop):
            if match.start() >= end:
                break
            found = self._resolve(match, text)
            if found is not None and found[0] < end and found[1] > start:
                return min(start, found[0]), max(end, found[1]), found[2]
        return None

    def open_end(self, text: str) -> int:
        """How many trailing characters of ``text`` could be the start of a secret: from the
        first piece that the end of ``text`` cuts short or that its form runs up to."""
        partial = self._compiled_partial()
        end = len(text)
        position = max(0, end - self.window)
        while position < end:
            match = partial.search(text, position, partial=True)
            if match is None or match.start() >= end:
                break
            if match.partial or self._reaches(match, text) == end:
                return end - match.start()
            position = max(match.end(), match.start() + 1)
        return 0

    def _reaches(self, match: regex.Match[str], text: str) -> int:
        """Where a full match ends once its head anchors are extended."""
        reach = match.end()
        for form, kind in self.pieces.get(match.group(), ()):
            if kind == "head":
                reach = max(reach, extend_forward(text, *match.span(), form.text)[1])
        return reach

    def open_start(self, text: str) -> int:
        """How many leading characters of ``text`` could be the end of a secret whose start
        was cut away (the ends of forms, matched backwards)."""
        reverse, forms = self._compiled_reverse()
        if not forms:
            return 0  # no secret known: nothing can end here
        window = text[: self.window][::-1]
        end = len(window)
        position = 0
        while found := reverse.search(window, position, partial=True):
            if found.partial or found.end() == end:
                return end - found.start()
            for form in forms[found.group()]:  # a suffix of 12+ characters: how far back
                if extend_forward(window, *found.span(), form)[1] == end:
                    return end - found.start()
            position = found.start() + 1
        return 0

    def _compiled_partial(self) -> regex.Pattern[str]:
        with self._lock:
            if self._partial is None:
                self._partial = regex.compile(trie_pattern(self.pieces, KEY_SHAPES))
            return self._partial

    def _compiled_reverse(self) -> tuple[regex.Pattern[str], dict[str, list[str]]]:
        """The ends of forms reversed (tail anchors, or whole forms), and the reversed forms
        each stands for."""
        with self._lock:
            if self._reverse is None:
                ends: dict[str, list[str]] = {}
                for piece, uses in self.pieces.items():
                    for form, kind in uses:
                        if kind != "head":
                            ends.setdefault(piece[::-1], []).append(form.text[::-1])
                self._reverse = (regex.compile(trie_pattern(ends)), ends)
            return self._reverse


_TAILS = "tails"  # a trie node's patterns (its other keys: one character, or "" for an end)


def trie_pattern(words: Iterable[str], tails: Iterable[tuple[str, str]] = ()) -> str:
    """One regular expression matching any of ``words`` (longest first) or any ``(start,
    pattern)`` of ``tails``, with common starts shared. Every alternative at the top begins
    with a literal character, so the engine skips in C the positions where nothing can start
    (an alternation of many literals would try each one at every position). Built without
    recursion: a secret may be thousands of characters long (a private key)."""
    trie: dict[str, Any] = {}

    def node_of(start: str) -> dict[str, Any]:
        node = trie
        for char in start:
            node = node.setdefault(char, {})
        return node

    for word in words:
        node_of(word)[""] = {}
    for start, pattern in tails:
        node_of(start).setdefault(_TAILS, []).append(pattern)

    def chain(char: str, child: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The literal along a run of single children, and the node where it branches."""
        literal = [char]
        while len(child) == 1 and len(next(iter(child))) == 1:
            ((char, child),) = child.items()
            literal.append(char)
        return re.escape("".join(literal)), child

    built: dict[int, str] = {}
    stack: list[tuple[dict[str, Any], bool]] = [(trie, False)]
    while stack:
        node, children_built = stack.pop()
        branches = [chain(char, child) for char, child in node.items() if len(char) == 1]
        if not children_built:
            stack.append((node, True))
            stack.extend((end, False) for _, end in branches)
            continue
        parts = [literal + built.pop(id(end)) for literal, end in branches]
        parts += node.get(_TAILS, [])  # a known form wins over a key shape
        if not parts:
            built[id(node)] = ""
        elif len(parts) == 1 and "" not in node:
            built[id(node)] = parts[0]
        else:
            built[id(node)] = "(?:" + "|".join(parts) + ")" + ("?" if "" in node else "")
    return built[id(trie)]


def piece_of(form: Form, kind: Kind) -> str:
    """The piece of ``form`` that stands for it: its prefix or suffix anchor, or itself."""
    if kind == "head":
        return form.text[: form.head]
    return form.text[-form.tail :] if kind == "tail" else form.text


def rare_start(piece: str) -> int:
    """Where to begin the literal searched for ``piece``: at its least common character that
    leaves SEARCHED_CHARS of it. The engine skips in C the positions where no literal can
    start, so literals that start with a lowercase letter or a digit cost the most: every
    word of ordinary output is tried."""
    last = len(piece) - SEARCHED_CHARS
    if last <= 0:
        return 0
    return min(range(last + 1), key=lambda at: (_commonness(piece[at]), at))


def _commonness(char: str) -> int:
    """How often ``char`` appears in ordinary output, roughly (0: rarely): lowercase letters
    by their frequency in English, then digits, punctuation, capitals, everything else."""
    if char.isspace():
        return 400
    if char.islower():
        return 300 + _LETTERS.get(char, 0)
    if char.isdigit():
        return 300
    if char in _COMMON_MARKS:
        return 200
    return 100 if char.isupper() else 0


def extend_forward(text: str, start: int, end: int, form: str) -> tuple[int, int]:
    """How far ``text`` from ``start`` agrees with ``form`` (``text[start:end]`` does),
    across line breaks followed by the form's continuation: (where the agreement ends, where
    it could go on: ``len(text)`` when the text ended before the form did)."""
    done = end - start  # characters of the form matched so far
    while True:
        agree = _common_prefix(text, end, form, done)
        end, done = end + agree, done + agree
        if done == len(form) or end == len(text):  # the end of the text: open, by its reach
            return end, end
        crossed = _crossing(text, end, form[done : done + CONTINUED_CHARS])
        if crossed is None:
            return end, end
        if crossed == len(text):  # the text ended on the line break
            return end, crossed
        end = crossed


def _crossing(text: str, at: int, following: str) -> int | None:
    """Where the form goes on past a line break at ``at`` (``following`` comes next), or
    ``len(text)`` when the text ends before that could be told; None: it does not."""
    for separator in SEPARATORS:
        piece = text[at : at + len(separator)]
        if piece != separator:
            if piece and separator.startswith(piece) and at + len(piece) == len(text):
                return len(text)
            continue
        after_at = at + len(separator)
        after = text[after_at : after_at + len(following)]
        if after == following:
            return after_at
        if following.startswith(after) and after_at + len(after) == len(text):
            return len(text)
    return None


def extend_backward(text: str, start: int, end: int, form: str) -> int:
    """Where the agreement of ``text`` with the end of ``form`` begins (``text[start:end]``
    agrees), across line breaks preceded by more of the form."""
    done = end - start
    while done < len(form):
        agree = _common_suffix(text, start, form, len(form) - done)
        start, done = start - agree, done + agree
        if done == len(form):
            break
        preceding = form[max(0, len(form) - done - CONTINUED_CHARS) : len(form) - done]
        for separator in SEPARATORS:
            if text.endswith(separator, 0, start) and text.endswith(
                preceding, 0, start - len(separator)
            ):
                start -= len(separator)
                break
        else:
            break
    return start


def _common_prefix(text: str, at: int, form: str, done: int) -> int:
    """How many characters of ``form[done:]`` agree with ``text[at:]``."""
    rest = len(form) - done
    if text.startswith(form[done:], at):
        return rest
    low, high = 0, rest  # text agrees for low characters, not for high
    while high - low > 1:
        middle = (low + high) // 2
        if text.startswith(form[done : done + middle], at):
            low = middle
        else:
            high = middle
    return low


def _common_suffix(text: str, at: int, form: str, left: int) -> int:
    """How many characters of ``form[:left]``, from its end, agree with ``text[:at]``."""
    if text.endswith(form[:left], 0, at):
        return left
    low, high = 0, left
    while high - low > 1:
        middle = (low + high) // 2
        if text.endswith(form[left - middle : left], 0, at):
            low = middle
        else:
            high = middle
    return low
