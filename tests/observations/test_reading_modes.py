"""Read modes against a plain-Python reference, on tiny chunks so boundaries are everywhere."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpad.config import Settings
from scratchpad.observations import ObservationStore, reading
from scratchpad.observations.chunks import ChunkSource

ALPHABET = st.sampled_from(["a", "b", " ", "\n", "é", "€", "𝄞", "x"])
TEXTS = st.text(alphabet=ALPHABET, max_size=300)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObservationStore]:
    path = tmp_path_factory.mktemp("obs") / "observations.db"
    with ObservationStore(path, settings=Settings(home=path.parent), chunk_bytes=7) as opened:
        yield opened


def reference_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if text.endswith("\n") or not text:
        lines.pop()
    return lines


def reference_grep(text: str, pattern: str, context: int, max_matches: int) -> list[str]:
    lines = reference_lines(text)
    rx = re.compile(pattern, re.MULTILINE)
    matching = [i for i, line in enumerate(lines) if rx.search(line)]
    shown = matching[:max_matches]
    marks: dict[int, str] = {}
    for index in shown:
        for before in range(max(0, index - context), index):
            marks.setdefault(before, "-")
        marks[index] = ":"
        for after in range(index + 1, min(len(lines), index + context + 1)):
            if after in matching:
                break
            marks.setdefault(after, "-")
    out: list[str] = []
    previous = None
    for index in sorted(marks):
        if previous is not None and index > previous + 1:
            out.append("--")
        out.append(f"{index + 1}{marks[index]}{lines[index]}")
        previous = index
    return out


@settings(max_examples=150, deadline=None)
@given(text=TEXTS, data=st.data())
def test_char_slices_match_python_slicing(
    store: ObservationStore, text: str, data: st.DataObject
) -> None:
    entry = store.put(text, turn_id="t")
    n = data.draw(st.integers(1, 400))
    assert store.read(entry, "head", n=n).content == text[:n]
    assert store.read(entry, "tail", n=n).content == text[-n:]
    start = data.draw(st.integers(0, len(text) + 5))
    end = data.draw(st.integers(start + 1, start + 400))
    sliced = store.read(entry, "range", start=start, end=end)
    assert sliced.content == text[start:end]
    assert (sliced.start, sliced.end, sliced.total) == (
        min(start, len(text)),
        min(end, len(text)),
        len(text),
    )
    assert store.read(entry, "full").content == text


@settings(max_examples=150, deadline=None)
@given(text=TEXTS, data=st.data())
def test_line_slices_match_split(store: ObservationStore, text: str, data: st.DataObject) -> None:
    entry = store.put(text, turn_id="t")
    lines = reference_lines(text)
    first = data.draw(st.integers(1, len(lines) + 2))
    last = data.draw(st.integers(first, first + 10))
    result = store.read(entry, "lines", start=first, end=last)
    assert result.content == "\n".join(lines[first - 1 : last])
    assert result.total == len(lines)


@settings(max_examples=200, deadline=None)
@given(
    text=TEXTS,
    pattern=st.sampled_from(["a", "é", "^b", "x$", "a b", "€|𝄞", "^$", "\\s"]),
    context=st.integers(0, 3),
    max_matches=st.integers(1, 6),
    block=st.integers(1, 40),
)
def test_grep_matches_a_line_by_line_reference(
    store: ObservationStore, text: str, pattern: str, context: int, max_matches: int, block: int
) -> None:
    entry = store.put(text, turn_id="t")
    source = ChunkSource(store._connection(), entry, store._is_inline(entry))
    found = reading.grep(source, re.compile(pattern, re.MULTILINE), context, max_matches,
                         10_000, block_chars=block)  # fmt: skip
    lines = reference_lines(text)
    assert found.lines == reference_grep(text, pattern, context, max_matches)
    assert found.matches == sum(1 for line in lines if re.search(pattern, line, re.MULTILINE))
    assert found.shown == min(found.matches, max_matches)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=200), bounds=st.tuples(st.integers(0, 220), st.integers(1, 60)))
def test_binary_slices_are_base64_bytes(
    store: ObservationStore, data: bytes, bounds: tuple[int, int]
) -> None:
    import base64

    entry = store.put(data, turn_id="t")
    start, length = bounds
    result = store.read(entry, "range", start=start, end=start + length)
    assert base64.b64decode(result.content) == data[start : start + length]
    assert result.unit == "bytes" and result.encoding == "base64"
    assert base64.b64decode(store.read(entry, "tail", n=length).content) == data[-length:]


def test_large_entry_slices_across_real_chunks(tmp_path: Path) -> None:
    text = "".join(f"line {i} é€ {'x' * (i % 50)}\n" for i in range(60_000))  # ~3.5 MB
    with ObservationStore(tmp_path / "o.db", settings=Settings(home=tmp_path)) as store:
        entry = store.put(text, turn_id="t")
        assert (
            store.read(entry, "range", start=1_000_000, end=1_000_500).content
            == text[1_000_000:1_000_500]
        )
        assert store.read(entry, "tail", n=3000).content == text[-3000:]
        lines = store.read(entry, "lines", start=41_234, end=41_236)
        assert lines.content.splitlines() == text.splitlines()[41_233:41_236]
        found = store.read(entry, "grep", pattern=r"^line 5999[0-9] ", context=0)
        assert found.matches == 10
        assert found.content.splitlines()[0].startswith("59991:line 59990 ")
