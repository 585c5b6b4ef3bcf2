"""Secrets in the observation store: scrubbed on the way in, and again when one is added later
(entries rewritten, re-chunked as a fresh put would be, ids and turns kept)."""

from __future__ import annotations

import base64
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.observations import ObservationStore
from scratchpad.observations.chunks import TextChunker, prepare
from scratchpad.scrub import scrubber

SECRET = "Tr0ub4dor&3-horse-battery"
LABEL = "[DS_X__PASSWORD]"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ObservationStore]:
    settings = Settings(home=tmp_path, observation_threshold_bytes=100)
    with ObservationStore(settings=settings, chunk_bytes=64) as opened:
        yield opened


def chunk_rows(store: ObservationStore, entry_id: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(store.path) as raw:
        return raw.execute(
            "SELECT seq, byte_start, char_start, line_start, data FROM content_chunks "
            "WHERE entry_id = ? ORDER BY seq",
            (entry_id,),
        ).fetchall()


def database_bytes(store: ObservationStore) -> bytes:
    files = store.path.parent.glob(store.path.name + "*")  # the database, -wal and -shm
    return b"".join(path.read_bytes() for path in files)


def test_put_scrubs_text_and_metadata_but_not_bytes(store: ObservationStore) -> None:
    scrubber().add(SECRET, "DS_X__PASSWORD")
    text_id = store.put(f"the password is {SECRET}\n", turn_id="t", metadata={"pw": SECRET})
    bytes_id = store.put(SECRET.encode(), turn_id="t")
    entry = store.get(text_id)
    assert entry.content == f"the password is {LABEL}\n"
    assert entry.info.metadata == {"pw": LABEL}
    assert SECRET not in entry.info.summary
    assert store.get(bytes_id).content == SECRET.encode()


def test_offload_stores_and_answers_scrubbed(store: ObservationStore) -> None:
    scrubber().add(SECRET, "DS_X__PASSWORD")
    observation = {"ok": True, "content": f"{SECRET}\n" * 20, "source": SECRET}
    synthetic = store.offload(observation, turn_id="t")
    assert synthetic["metadata"] == {"source": LABEL}
    assert SECRET not in str(synthetic)
    stored = store.get(synthetic["observation_id"])
    assert stored.content == f"{LABEL}\n" * 20
    assert stored.info.metadata == {"ok": True, "source": LABEL}


def test_chunker_cuts_where_prepare_cuts() -> None:
    rng = random.Random(7)
    alphabet = "ab\nc\u00e9\u20ac\U0001f600"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        chunk_bytes = rng.randint(4, 30)
        chunker = TextChunker(chunk_bytes)
        chunks, at = [], 0
        while at < len(text):
            step = rng.randint(0, 15)
            chunks += chunker.feed(text[at : at + step])
            at += step
        whole = chunker.finish()
        expected = prepare(text, chunk_bytes)
        assert whole.inline == expected.inline
        counts = (whole.size_bytes, whole.char_count, whole.line_count)
        assert counts == (expected.size_bytes, expected.char_count, expected.line_count)
        got = [(c.seq, c.byte_start, c.char_start, c.line_start, bytes(c.data)) for c in chunks]
        got += [
            (c.seq, c.byte_start, c.char_start, c.line_start, bytes(c.data)) for c in whole.chunks
        ]
        want = [
            (c.seq, c.byte_start, c.char_start, c.line_start, bytes(c.data))
            for c in expected.chunks
        ]
        assert got == want


def test_rescrub_rewrites_entries_that_held_a_secret(store: ObservationStore) -> None:
    encoded = base64.b64encode(SECRET.encode()).decode()
    text = "".join(f"line {i} \u00e9 {SECRET} {encoded}\n" for i in range(40))
    big = store.put(text, turn_id="turn-1", step_num=3, tool="scratchpad", metadata={"k": SECRET})
    small = store.put(f"pw={SECRET}", turn_id="turn-2")
    plain = store.put("nothing to see\n" * 30, turn_id="turn-3")
    before = {entry_id: store.info(entry_id) for entry_id in (big, small, plain)}
    plain_rows = chunk_rows(store, plain)

    scrubber().add(SECRET, "DS_X__PASSWORD")
    counts = store.rescrub()

    assert (counts.checked, counts.changed) == (3, 2)
    entry = store.get(big, turn_id="turn-1")
    expected = scrubber().scrub(text)
    assert SECRET not in expected and LABEL in expected
    assert entry.content == expected
    info, old = entry.info, before[big]
    kept = (info.turn_id, info.step_num, info.tool, info.created_at, info.expires_at)
    assert kept == (old.turn_id, old.step_num, old.tool, old.created_at, old.expires_at)
    assert info.metadata == {"k": LABEL}
    fresh = store.put(expected, turn_id="x")  # laid out as a fresh put of the same text
    assert [row[1:] for row in chunk_rows(store, big)] == [
        row[1:] for row in chunk_rows(store, fresh)
    ]
    assert (info.size_bytes, info.char_count, info.line_count, info.summary) == (
        store.info(fresh).size_bytes,
        store.info(fresh).char_count,
        store.info(fresh).line_count,
        store.info(fresh).summary,
    )
    last_line = expected.splitlines()[-1]
    assert store.read(big, "grep", pattern="line 39").content == f"40:{last_line}"
    assert store.get(small).content == f"pw={LABEL}"
    assert store.info(plain) == before[plain]
    assert chunk_rows(store, plain) == plain_rows
    assert SECRET.encode() not in database_bytes(store)
    assert encoded.encode() not in database_bytes(store)


def test_rescrub_catches_a_secret_split_across_chunks(store: ObservationStore) -> None:
    for offset in range(0, 64, 7):
        store.put("x" * offset + SECRET + "y" * 200, turn_id="t")
    scrubber().add(SECRET, "DS_X__PASSWORD")
    assert store.rescrub().changed == 10
    for info in store.list_all():
        content = store.get(info.id).content
        assert isinstance(content, str)
        assert SECRET not in content and LABEL in content
    assert store.rescrub().changed == 0  # nothing left to do
