"""Grep patterns: compiled with the ``regex`` package and searched under one time budget.

The model writes the patterns. With Python's ``re`` a pattern such as ``(a+)+$`` takes
exponential time on a short line, holding the GIL all along: every thread and the server's
event loop stop with it. ``regex`` matches the same syntax (its version 0 is ``re``'s), lets
other threads run while it matches (``concurrent=True``) and stops at a deadline
(``timeout=``). A grep gets one budget for all its searches; running out of it is an
ObservationError that says to simplify the pattern, never a hang.
"""

from __future__ import annotations

import time

import regex

from scratchpad.errors import InvalidInputError, ObservationError

GREP_FLAGS = regex.MULTILINE | regex.VERSION0


class GrepPattern:
    """A compiled grep pattern whose searches share a deadline, set when it is compiled."""

    def __init__(self, pattern: str | None, budget_s: float) -> None:
        if not isinstance(pattern, str) or not pattern:
            raise InvalidInputError("grep needs a pattern (a regular expression), e.g. 'ERROR'")
        try:
            self.compiled = regex.compile(pattern, GREP_FLAGS)
        except (regex.error, ValueError) as exc:
            raise InvalidInputError(f"invalid regular expression {pattern!r}: {exc}") from exc
        self.pattern = pattern
        self.budget_s = budget_s
        self.deadline = time.monotonic() + budget_s

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> regex.Match[str] | None:
        """The first match in ``text[pos:endpos]``; ObservationError once the budget is spent."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise self._too_slow()
        try:
            return self.compiled.search(text, pos, endpos, concurrent=True, timeout=remaining)
        except TimeoutError:
            raise self._too_slow() from None

    def _too_slow(self) -> ObservationError:
        return ObservationError(
            f"grep stopped after {self.budget_s:g}s: the pattern {self.pattern!r} is too slow "
            "for this text. Simplify it: avoid nested or overlapping quantifiers such as "
            "(a+)+ or (a|a)*, and prefer a literal word or an anchored pattern"
        )
