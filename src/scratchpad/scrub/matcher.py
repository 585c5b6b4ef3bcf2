"""The one scrubber: every secret value this process knows, removed from text on its way out.

A secret is caught as itself and as it looks once encoded: JSON-escaped, URL-encoded, hex
(both cases), base64 and URL-safe base64 — also the shifted forms that appear when the value
follows other bytes in the encoded data — and, for multi-line values, line by line. Strings
shaped like well-known API keys (``sk-…``, ``sk-ant-…``, ``AIza…``, ``ghp_…``, ``github_pat_…``,
``xox[abp]-…``, ``AKIA…``) are caught even when nobody registered them.

A known secret becomes ``[NAME]`` (its variable, e.g. ``[DS_POSTGRES_PROD__PASSWORD]``), an
unknown key-shaped string ``[REDACTED]``. Values shorter than :data:`MIN_SECRET_CHARS` are not
taken: they would redact ordinary words.

Streams use :meth:`Scrubber.stream`: a value split across two chunks is still caught, because
a tail that could be the start of a secret is held back until the next chunk or the end.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote, quote_plus

import regex

MIN_SECRET_CHARS = 6
REDACTED = "[REDACTED]"
HELD_WORD_CHARS = 256  # a trailing run of key characters held back by a stream, at most

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
_TRAILING_WORD = re.compile(rf"[A-Za-z0-9_\-]{{1,{HELD_WORD_CHARS}}}\Z")


def encodings(value: str) -> set[str]:
    """The forms ``value`` takes in output: itself, escaped, percent-encoded, hex, base64."""
    raw = value.encode("utf-8")
    forms = {
        value,
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
        quote(value, safe=""),
        quote(value),
        quote_plus(value),
        raw.hex(),
        raw.hex().upper(),
    }
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        forms.update(_base64_cores(raw, encode))
    return {form for form in forms if len(form) >= MIN_SECRET_CHARS}


def _base64_cores(raw: bytes, encode: Callable[[bytes], bytes]) -> set[str]:
    """The base64 characters that depend on ``raw`` alone, for each of its three alignments
    (a value after 0, 1 or 2 other bytes encodes differently)."""
    cores = set()
    for shift in range(3):
        text = encode(b"\0" * shift + raw).decode("ascii")
        first = -(-8 * shift // 6)  # the first character made only of the value's bits
        last = 8 * (shift + len(raw)) // 6  # characters past it mix in what follows
        cores.add(text[first:last])
    return cores


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


def is_secret_length(value: object) -> bool:
    """Whether ``value`` is long enough to be scrubbed without redacting ordinary words."""
    return isinstance(value, str) and len(value.strip()) >= MIN_SECRET_CHARS


def secret_lines(value: str) -> list[str]:
    """A value and, when it spans lines, each of its lines long enough to be caught alone."""
    lines = [line.strip() for line in value.splitlines()]
    return [value] + [line for line in lines if len(line) >= MIN_SECRET_CHARS and line != value]


class Scrubber:
    """Knows every secret value of the process; ``scrub`` replaces them in text.

    Thread-safe; adding values rebuilds one compiled pattern. Values are never forgotten (text
    stored before a rotation still holds the old one).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._labels: dict[str, str] = {}  # each form of each secret → its replacement
        self._pattern: re.Pattern[str]
        self._partial: regex.Pattern[str]  # the same pattern, for matches cut by a chunk's end
        self._longest = 0
        self.version = 0  # grows with every change (callers re-scrub stored text on it)
        self._rebuild()

    def reset(self) -> None:
        """Forget every secret (for tests only: a process never forgets one otherwise)."""
        with self._lock:
            self._labels.clear()
            self._rebuild()

    def add(self, value: str, name: str | None = None) -> bool:
        """Register a secret; False (and nothing kept) when it is too short to be one."""
        if not is_secret_length(value):
            return False
        self.add_many({value: name})
        return True

    def add_many(self, secrets: dict[str, str | None]) -> int:
        """Register secrets (value → variable name or None); how many new forms that made.
        Values too short to be secrets are skipped."""
        added = 0
        with self._lock:
            for value, name in secrets.items():
                if not is_secret_length(value):
                    continue
                label = f"[{name}]" if name else REDACTED
                for line in secret_lines(value):
                    for form in encodings(line):
                        known = self._labels.get(form)
                        added += known is None
                        if known is None or (known == REDACTED and name):
                            self._labels[form] = label
            if added:
                self._rebuild()
        return added

    def _rebuild(self) -> None:
        forms = list(self._labels)
        self._pattern = re.compile(trie_pattern(forms, KEY_SHAPES))
        self._partial = regex.compile(self._pattern.pattern)
        self._longest = max(map(len, forms), default=0)
        self.version += 1

    def knows(self, text: str) -> bool:
        """Whether ``text`` holds anything this scrubber would replace."""
        return self._pattern.search(text) is not None

    def scrub(self, text: str) -> str:
        """``text`` with every secret (and key-shaped string) replaced."""
        if not text:
            return text
        return self._pattern.sub(lambda match: self.replacement(match, text), text)

    def replacement(self, match: re.Match[str], text: str) -> str:
        """What replaces one match: its label, or REDACTED for a key shape (none at all for a
        key shape that only continues a longer word)."""
        found = match.group()
        label = self._labels.get(found)
        if label is not None:
            return label
        start = match.start()
        return found if start and text[start - 1] in _KEY_CHARS else REDACTED

    def scrub_data(self, data: Any) -> Any:
        """Strings anywhere in nested lists and dicts (keys too) scrubbed; the rest as is."""
        return map_strings(data, self.scrub)

    def stream(self) -> StreamScrubber:
        """A scrubber for one stream of chunks (a cell's stdout, say)."""
        return StreamScrubber(self)

    def held_tail(self, text: str) -> int:
        """How many trailing characters of ``text`` could begin a secret still to come: from
        the first match the end of ``text`` cuts short (``regex``'s partial matching, over the
        last longest-form characters), or a trailing run of key characters."""
        end = len(text)
        held = 0
        position = max(0, end - max(self._longest - 1, HELD_WORD_CHARS))
        while position < end:
            match = self._partial.search(text, position, partial=True)
            if match is None or match.start() >= end:
                break
            if match.partial or match.end() == end:
                held = end - match.start()
                break
            position = max(match.end(), match.start() + 1)
        word = _TRAILING_WORD.search(text, max(0, end - HELD_WORD_CHARS))
        return max(held, 0 if word is None else end - word.start())


class StreamScrubber:
    """Scrubs a stream chunk by chunk, holding back a tail that may continue into the next."""

    def __init__(self, scrubber: Scrubber) -> None:
        self._scrubber = scrubber
        self._pending = ""

    def feed(self, chunk: str) -> str:
        """The scrubbed text that is safe to pass on now (possibly empty)."""
        text = self._pending + chunk
        scrubber = self._scrubber
        cut = len(text) - scrubber.held_tail(text)
        pieces: list[str] = []
        done = 0
        for match in scrubber._pattern.finditer(text):
            if match.end() > cut:
                cut = min(cut, match.start())  # never split what was found
                break
            pieces += (text[done : match.start()], scrubber.replacement(match, text))
            done = match.end()
        pieces.append(text[done:cut])
        self._pending = text[cut:]
        return "".join(pieces)

    def flush(self) -> str:
        """What is still held back, scrubbed (the stream ended)."""
        text, self._pending = self._pending, ""
        return self._scrubber.scrub(text)


def map_strings(data: Any, function: Callable[[str], str]) -> Any:
    """``function`` applied to every string in nested lists, tuples and dicts (keys too)."""
    if isinstance(data, str):
        return function(data)
    if isinstance(data, dict):
        return {map_strings(k, function): map_strings(v, function) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(map_strings(item, function) for item in data)
    return data
