"""Read modes against a plain-Python reference, on tiny chunks so boundaries are everywhere."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError
from scratchpad.observations import ObservationStore

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
    start = data.draw(st.integers(0, max(0, len(text) - 1)))
    end = data.draw(st.integers(start + 1, start + 400))
    sliced = store.read(entry, "range", start=start, end=end)
    assert sliced.content == text[start:end]
    assert (sliced.start, sliced.end, sliced.total) == (start, min(end, len(text)), len(text))
    assert store.read(entry, "full").content == text
    if text:
        with pytest.raises(InvalidInputError, match="past the end"):
            store.read(entry, "range", start=len(text) + data.draw(st.integers(0, 5)), end=10**6)


@settings(max_examples=150, deadline=None)
@given(text=TEXTS, data=st.data())
def test_line_slices_match_split(store: ObservationStore, text: str, data: st.DataObject) -> None:
    entry = store.put(text, turn_id="t")
    lines = reference_lines(text)
    first = data.draw(st.integers(1, max(1, len(lines))))
    last = data.draw(st.integers(first, first + 10))
    result = store.read(entry, "lines", start=first, end=last)
    assert result.content == "\n".join(lines[first - 1 : last])
    assert (result.start, result.end, result.total) == (
        first,
        min(last, len(lines)),
        len(lines),
    )
    if len(lines) > 1:
        with pytest.raises(InvalidInputError, match="past the end"):
            store.read(entry, "lines", start=len(lines) + 1)


@settings(max_examples=200, deadline=None)
@given(
    text=TEXTS,
    pattern=st.sampled_from(["a", "é", "^b", "x$", "a b", "€|𝄞", "^$", "\\s", "[^a]b", "a\\nb"]),
    context=st.integers(0, 3),
    max_matches=st.integers(1, 6),
    block=st.integers(1, 40),
)
def test_grep_matches_a_line_by_line_reference(
    store: ObservationStore, text: str, pattern: str, context: int, max_matches: int, block: int
) -> None:
    blocky = ObservationStore(store.path, settings=store.settings, chunk_bytes=7,
                              grep_block_chars=block)  # fmt: skip
    entry = blocky.put(text, turn_id="t")
    found = blocky.read(entry, "grep", pattern=pattern, context=context, max_matches=max_matches)
    blocky.close()
    lines = reference_lines(text)
    shown = found.content.split("\n") if found.content else []
    assert shown == reference_grep(text, pattern, context, max_matches)
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
    if 0 < start >= len(data):
        with pytest.raises(InvalidInputError, match=f"has {len(data)} bytes"):
            store.read(entry, "range", start=start, end=start + length)
        return
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


def test_crlf_lines_and_grep(store: ObservationStore) -> None:
    entry = store.put("ERROR one\r\nok two\r\nERROR three\r\n", turn_id="t")
    assert store.read(entry, "lines", start=1, end=2).content == "ERROR one\nok two"
    found = store.read(entry, "grep", pattern="one$|three$")
    assert found.content == "1:ERROR one\n--\n3:ERROR three"


def test_patterns_that_cross_lines_match_line_by_line(tmp_path: Path) -> None:
    text = "[a] x\n" * 20_000 + "b]\n"
    with ObservationStore(tmp_path / "o.db", settings=Settings(home=tmp_path)) as store:
        entry = store.put(text, turn_id="t")
        found = store.read(entry, "grep", pattern=r"[^\]]+\]", max_matches=2)
        assert found.matches == 20_001
        assert found.content == "1:[a] x\n2:[a] x"


def test_a_line_longer_than_the_cap_is_cut_not_skipped(tmp_path: Path) -> None:
    capped = Settings(home=tmp_path, observation_full_cap_chars=1000)
    with ObservationStore(tmp_path / "o.db", settings=capped) as store:
        entry = store.put("z" * 5000 + "\nshort\n", turn_id="t")
        first = store.read(entry, "lines", start=1, end=2)
        assert first.content == "z" * 1000
        assert (first.start, first.end) == (1, 1)
        assert "line 1 is cut at 1000 of its 5000 characters" in first.note
        assert store.read(entry, "lines", start=2).content == "short"


def test_grep_shows_a_window_around_a_match_in_a_long_line(store: ObservationStore) -> None:
    line = "x" * 700_000 + "NEEDLE" + "y" * 1000
    found = store.read(store.put(line, turn_id="t"), "grep", pattern="NEEDLE")
    shown = found.content
    assert shown.startswith("1:[col 699875] …")
    assert "NEEDLE" in shown and len(shown) < 600
