"""Scrubber benchmark: prints figures, asserts nothing.

Throughput of the scrubber on 10 MB of output holding 100 registered secrets (and with 5 and
0), one pass and as a stream in 64 KiB chunks (registering: the forms of every secret built
and the search compiled), beside a reference measured in the same run:
the same text searched for the raw secrets alone by ``str.replace``, the cheapest thing that
could be called scrubbing. Then the leak count of the test corpus (every form of every secret
as the corpus cell prints them, scrubbed as one text and as a stream cut at every position)
and the over-redaction count of the control corpus.
"""

from __future__ import annotations

import random
import secrets
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.scrub.corpus import (
    CONTROL_LINES,
    SECRETS,
    UNKNOWN_KEYS,
    leaks,
    printed_forms,
)

from scratchpad.scrub import Scrubber

MB = 1_000_000
WORDS = [
    "the",
    "of",
    "and",
    "rows",
    "table",
    "value",
    "mean",
    "error",
    "load",
    "query",
    "result",
    "took",
    "ms",
    "ok",
    "id",
    "name",
    "at",
]


def output_text(values: list[str], size: int) -> str:
    """~``size`` characters of log-like lines; about one line in a thousand holds a secret."""
    rng = random.Random(7)
    lines, total = [], 0
    while total < size:
        line = " ".join(rng.choice(WORDS) for _ in range(10)) + f" {rng.random():.6f}"
        if values and rng.random() < 0.001:
            line += " " + rng.choice(values)
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


def throughput(count: int) -> None:
    values = [secrets.token_urlsafe(24) for _ in range(count)]
    scrubber = Scrubber()
    start = time.perf_counter()
    scrubber.add_many({value: f"DS_X_{i}__TOKEN" for i, value in enumerate(values)})
    scrubber.stream().feed("x" * 300)  # the search and the stream's partial matching compiled
    registered = time.perf_counter() - start
    text = output_text(values, 10 * MB)
    start = time.perf_counter()
    out = scrubber.scrub(text)
    whole = time.perf_counter() - start
    start = time.perf_counter()
    stream, chunk, parts = scrubber.stream(), 64 * 1024, []
    for at in range(0, len(text), chunk):
        parts.append(stream.feed(text[at : at + chunk]))
    parts.append(stream.flush())
    streamed = time.perf_counter() - start
    start = time.perf_counter()
    naive = text
    for value in values:
        naive = naive.replace(value, "[X]")
    reference = time.perf_counter() - start
    leaked = sum(value in out or value in "".join(parts) for value in values)
    print(
        f"{count:>3} secrets: scrub {len(text) / MB / whole:6.1f} MB/s · stream "
        f"{len(text) / MB / streamed:6.1f} MB/s · reference str.replace of raw values "
        f"{len(text) / MB / reference:7.1f} MB/s · registering {registered * 1000:5.0f} ms · "
        f"leaked {leaked}"
    )


def corpus() -> None:
    scrubber = Scrubber()
    scrubber.add_many({value: name for name, value in SECRETS.items()})
    forms = [form for value in SECRETS.values() for form in printed_forms(value)]
    forms.extend(UNKNOWN_KEYS)
    text = "\n".join(f"before {form} after" for form in forms)
    whole = leaks(scrubber.scrub(text))
    split = 0
    for form in forms:  # every cut of every form, across two chunks
        for cut in range(1, len(form)):
            stream = scrubber.stream()
            out = stream.feed("x " + form[:cut]) + stream.feed(form[cut:] + " y") + stream.flush()
            split += bool(leaks(out))
    control = "\n".join(CONTROL_LINES)
    changed = sum(scrubber.scrub(line) != line for line in CONTROL_LINES)
    print(
        f"corpus: {len(forms)} secret forms, leaks {len(whole)} as one text, {split} across "
        f"every two-chunk cut; control: {changed} of {len(CONTROL_LINES)} ordinary lines changed"
        f" ({len(control)} characters)"
    )


def main() -> None:
    for count in (0, 5, 100):
        throughput(count)
    corpus()


if __name__ == "__main__":
    main()
