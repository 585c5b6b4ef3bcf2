"""Observation store benchmark: prints figures, asserts nothing.

Beside each slice read it prints a reference measured in the same run: reading the same slice
the naive way (load the whole content into Python, then slice), which is what chunked storage
avoids. ``--quick`` uses a 20 MB entry instead of 100 MB.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.observations import ObservationStore
from scratchpad.scrub import scrubber

MB = 1_000_000


def timed(action: Callable[[], object], repeats: int) -> float:
    """Median seconds of ``action`` over ``repeats`` runs."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def log_text(size: int) -> str:
    line = "INFO 2026-04-26 10:00:01 worker=7 request served in 12ms path=/api/items\n"
    body = line * (size // len(line))
    return body[: size // 2] + "ERROR 2026-04-26 12:00:00 disk full on /var\n" + body[size // 2 :]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:9.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    big = 20 * MB if args.quick else 100 * MB
    with tempfile.TemporaryDirectory(prefix="scratchpad-obs-bench-") as tmp:
        store = ObservationStore(Path(tmp) / "o.db", settings=Settings(home=Path(tmp)))
        rows: list[tuple[str, str, str]] = []
        ids: dict[int, str] = {}
        for size in (1_000, MB, big):
            text = log_text(size)
            start = time.perf_counter()
            ids[size] = store.put(text, turn_id="b")
            rows.append((f"put {size // 1000:,} KB", ms(time.perf_counter() - start), ""))

        scrubber().add("hunter2-very-secret", "DS_BENCH__PASSWORD")  # text puts scan for it
        text = log_text(big)
        start = time.perf_counter()
        store.put(text, turn_id="b")
        elapsed = time.perf_counter() - start
        rows.append((f"put {big // 1000:,} KB, a secret known", ms(elapsed), ""))

        def naive_slice(entry: str, start: int, end: int) -> str:
            content = store.get(entry).content  # loads and decodes the whole value
            assert isinstance(content, str)
            return content[start:end]

        for size in (MB, big):
            entry = ids[size]
            total = store.info(entry).char_count
            middle = total // 2
            cases = [
                ("head 2000", 0, 2000),
                ("range 2000 in the middle", middle, middle + 2000),
                ("tail 2000", total - 2000, total),
            ]
            for label, first, last in cases:
                mode = label.split()[0]
                ours = timed(partial(store.read, entry, mode, start=first, end=last), 21)
                reference = timed(partial(naive_slice, entry, first, last), 3)
                rows.append((f"{label} of {size // MB} MB", ms(ours), ms(reference)))

        entry = ids[big]
        grep_time = timed(partial(store.read, entry, "grep", pattern="ERROR", context=2), 3)
        text = naive_slice(entry, 0, total)
        pattern = re.compile("ERROR")
        python_loop = timed(lambda: [ln for ln in text.splitlines() if pattern.search(ln)], 1)
        rows.append((f"grep 'ERROR' over {big // MB} MB", ms(grep_time), ms(python_loop)))

        start = time.perf_counter()
        for number in range(10_000):
            store.put(f"small entry {number}", turn_id="many", step_num=number, ttl_seconds=0.5)
        rows.append(("put 10 000 small entries", ms(time.perf_counter() - start), ""))
        listing = timed(lambda: store.list_for_turn("many"), 5)
        rows.append(("list_for_turn (10 000 entries)", ms(listing), ""))
        time.sleep(0.6)
        start = time.perf_counter()
        removed = store.gc()
        rows.append((f"gc of {removed:,} expired entries", ms(time.perf_counter() - start), ""))
        store.close()

    print(f"{'operation':36} {'store':>12} {'naive':>12}")
    for label, ours_text, reference_text in rows:
        print(f"{label:36} {ours_text:>12} {reference_text:>12}")
    print("naive = load the whole entry into Python and slice it (for grep: a Python line loop)")


if __name__ == "__main__":
    main()
