"""The scrubber: every form of every known secret, and key-shaped strings, replaced in text.

The forms a secret takes (:mod:`scratchpad.scrub.forms`) are built once when it is
registered; the search over all of them (:mod:`scratchpad.scrub.patterns`) is compiled once
per change, on first use. A known secret becomes ``[NAME]`` (its variable, e.g.
``[DS_POSTGRES_PROD__PASSWORD]``), an unknown key-shaped string ``[REDACTED]``.

Streams use :meth:`Scrubber.stream`: a value split across two chunks is still caught, because
a tail that could be the start of a secret is held back until the next chunk or the end. Where
text is cut (a capped output keeps its head and tail), :meth:`Scrubber.trim_cut` drops what
could be part of a secret on either side of the cut.
"""

from __future__ import annotations

import bisect
import itertools
import re
import threading
from collections.abc import Callable
from typing import Any

from scratchpad.scrub.forms import MIN_SECRET_CHARS, Form, forms_of
from scratchpad.scrub.patterns import HELD_WORD_CHARS, REDACTED, Patterns, Span

_TRAILING_WORD = re.compile(rf"[A-Za-z0-9_\-]{{1,{HELD_WORD_CHARS}}}\Z")


def is_secret_length(value: object) -> bool:
    """Whether ``value`` is long enough to be scrubbed without redacting ordinary words."""
    return isinstance(value, str) and len(value.strip()) >= MIN_SECRET_CHARS


class Scrubber:
    """Knows every secret value of the process; ``scrub`` replaces them in text.

    Thread-safe; adding values makes the search be compiled again (on its next use). Values
    are never forgotten (text stored before a rotation still holds the old one).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._forms: dict[str, Form] = {}  # each form of each secret, by its text
        self._labels: dict[str, str] = {}  # each form's replacement
        self._provisional: set[str] = set()  # forms whose label a lasting name replaces
        self._patterns: Patterns | None = None  # compiled on first use after a change
        self.version = 0  # grows with every change (callers re-scrub stored text on it)

    def reset(self) -> None:
        """Forget every secret (for tests only: a process never forgets one otherwise)."""
        with self._lock:
            self._forms.clear()
            self._labels.clear()
            self._provisional.clear()
            self._changed()

    def add(self, value: str, name: str | None = None) -> bool:
        """Register a secret; False (and nothing kept) when it is too short to be one."""
        if not is_secret_length(value):
            return False
        self.add_many({value: name})
        return True

    def add_many(self, secrets: dict[str, str | None], *, provisional: bool = False) -> int:
        """Register secrets (value → variable name or None); how many new forms that made.
        Values too short to be secrets are skipped. A value keeps the first name it was
        given, except that a name beats none and a lasting name beats a ``provisional`` one
        (what a value is called while it is tested, before it is saved under its own)."""
        added = 0
        with self._lock:
            for value, name in secrets.items():
                if not is_secret_length(value):
                    continue
                label = f"[{name}]" if name else REDACTED
                for form in forms_of(value):
                    known = self._labels.get(form.text)
                    if known is None:
                        added += 1
                        self._forms[form.text] = form
                    if known is None or (name and self._renames(form.text, known, provisional)):
                        self._labels[form.text] = label
                        if provisional and name:
                            self._provisional.add(form.text)
                        else:
                            self._provisional.discard(form.text)
            if added:
                self._changed()
        return added

    def _renames(self, form: str, known: str, provisional: bool) -> bool:
        """Whether a name given now replaces ``known``, the label ``form`` has."""
        return known == REDACTED or (form in self._provisional and not provisional)

    def _changed(self) -> None:
        self._patterns = None
        self.version += 1

    def _compiled(self) -> Patterns:
        patterns = self._patterns
        if patterns is None:
            with self._lock:
                if self._patterns is None:
                    self._patterns = Patterns(self._forms.values(), self._labels)
                patterns = self._patterns
        return patterns

    def reach(self) -> int:
        """The most characters one secret spans as the search finds it (line breaks inside
        included): text searched in pieces that overlap by this much misses none."""
        return self._compiled().window

    def scrub(self, text: str) -> str:
        """``text`` with every secret (and key-shaped string) replaced."""
        if not text:
            return text
        return _replaced(text, self._compiled().spans(text))

    def scrub_marked(self, text: str, marks: list[int]) -> tuple[str, list[int]]:
        """``text`` scrubbed, and ``marks`` (places in it, in characters) moved to the same
        places of the scrubbed text; a mark inside a secret goes after its label."""
        if not text or not marks:
            return self.scrub(text), marks
        spans = self._compiled().spans(text)
        starts = [start for start, _, _ in spans]
        grown = (len(label) - (end - start) for start, end, label in spans)
        shifts = list(itertools.accumulate(grown))  # how much longer the text is after each
        moved = []
        for mark in marks:
            before = bisect.bisect_left(starts, mark)  # the spans that start before the mark
            if before:
                mark = max(mark, spans[before - 1][1]) + shifts[before - 1]
            moved.append(mark)
        return _replaced(text, spans), moved

    def scrub_data(self, data: Any) -> Any:
        """Strings anywhere in nested lists and dicts (keys too) scrubbed; the rest as is."""
        return map_strings(data, self.scrub)

    def stream(self) -> StreamScrubber:
        """A scrubber for one stream of chunks (a cell's stdout, say)."""
        return StreamScrubber(self)

    def trim_cut(self, head: str, tail: str) -> tuple[str, str]:
        """The two sides of a cut (the kept head and tail of a capped text) without what could
        be part of a secret the cut went through: the end of ``head`` that could begin one,
        the start of ``tail`` that could end one."""
        patterns = self._compiled()
        return head[: len(head) - patterns.open_end(head)], tail[patterns.open_start(tail) :]

    def held_tail(self, text: str) -> int:
        """How many trailing characters of ``text`` could begin a secret still to come: from
        the first piece the end of ``text`` cuts short, or a trailing run of key characters
        (the start of a key shape)."""
        word = _TRAILING_WORD.search(text, max(0, len(text) - HELD_WORD_CHARS))
        held = self._compiled().open_end(text)
        return max(held, 0 if word is None else len(text) - word.start())


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
        for start, end, label in scrubber._compiled().spans(text):
            if end > cut:
                cut = min(cut, start)  # never split what was found
                break
            pieces += (text[done:start], label)
            done = end
        pieces.append(text[done:cut])
        self._pending = text[cut:]
        return "".join(pieces)

    @property
    def held_chars(self) -> int:
        """How many characters fed so far are held back (not passed on yet)."""
        return len(self._pending)

    def flush(self, *, cut: bool = False) -> str:
        """What is still held back, scrubbed (the stream ended). With ``cut``, the stream was
        cut short here (more followed that is not shown): what could begin a secret goes."""
        text, self._pending = self._pending, ""
        if cut:
            text = self._scrubber.trim_cut(text, "")[0]
        return self._scrubber.scrub(text)


def _replaced(text: str, spans: list[Span]) -> str:
    """``text`` with each span replaced by its label."""
    if not spans:
        return text
    pieces: list[str] = []
    done = 0
    for start, end, label in spans:
        pieces += (text[done:start], label)
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def map_strings(data: Any, function: Callable[[str], str]) -> Any:
    """``function`` applied to every string in nested lists, tuples and dicts (keys too)."""
    if isinstance(data, str):
        return function(data)
    if isinstance(data, dict):
        return {map_strings(k, function): map_strings(v, function) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(map_strings(item, function) for item in data)
    return data
