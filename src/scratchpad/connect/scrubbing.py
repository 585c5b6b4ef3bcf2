"""What comes out of a probe, scrubbed of every value of its submission.

The process's scrubber learns the submission's secret values for good (a wrong password is
still a password), under the probe's names until the vault saves them under the pads'; a
scrubber of the submission's own knows every value, a host name too (it is not the vault's
business, but it is not the probe's to show either). Everything the probe says, prints or
puts in the form passes both, before its model or anyone else sees it: texts whole, the
model's prose as a stream (a value split across deltas is still caught), and the free text
of objects it builds, where names and ids are left as they are (they are checked not to
hold a value instead).
"""

from __future__ import annotations

from typing import Any

from scratchpad.connect.prompt import env_variable
from scratchpad.connect.submissions import Submission
from scratchpad.scrub import Scrubber, StreamScrubber, register, scrubber

STRUCTURAL_KEYS = frozenset({"form_id", "name", "id", "type", "kind", "selected_method"})


class SubmissionScrubber:
    """``scrub(text)``: the process's scrubber, then the submission's."""

    def __init__(self, submission: Submission) -> None:
        secret = submission.secret_fields()
        named = ((v, env_variable(n)) for n, v in submission.values.items() if n in secret)
        register(named, provisional=True)  # saved, a value is named as the pads see it
        self._local = Scrubber()
        self._local.add_many({v: env_variable(n) for n, v in submission.values.items()})

    def __call__(self, text: str) -> str:
        return self._local.scrub(scrubber().scrub(text))

    def holds_value(self, text: str) -> bool:
        return self(text) != text

    def stream(self) -> ChainedStream:
        return ChainedStream(scrubber().stream(), self._local.stream())

    def free_text(self, data: Any) -> Any:
        """Strings in nested dicts and lists scrubbed, but not keys, nor the values of
        :data:`STRUCTURAL_KEYS` (names and ids)."""
        if isinstance(data, str):
            return self(data)
        if isinstance(data, dict):
            return {k: v if k in STRUCTURAL_KEYS else self.free_text(v) for k, v in data.items()}
        if isinstance(data, list | tuple):
            return type(data)(self.free_text(item) for item in data)
        return data


class ChainedStream:
    """Two stream scrubbers one after the other."""

    def __init__(self, first: StreamScrubber, second: StreamScrubber) -> None:
        self._first, self._second = first, second

    def feed(self, chunk: str) -> str:
        return self._second.feed(self._first.feed(chunk))

    def flush(self) -> str:
        return self._second.feed(self._first.flush()) + self._second.flush()
