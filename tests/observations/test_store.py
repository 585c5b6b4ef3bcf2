"""The observation store: schema, put/get, offload, turns, expiry, references, bad input."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError, ObservationError, ObservationNotFoundError
from scratchpad.observations import ObservationStore
from scratchpad.observations.connections import MAX_IDLE
from scratchpad.observations.summary import OFFLOAD_NOTE, summarize

LOG = "".join(f"INFO 2026-04-26 event number {i}\n" for i in range(3000)) + "ERROR LAST_EVENT\n"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ObservationStore]:
    with ObservationStore(settings=Settings(home=tmp_path)) as opened:
        yield opened


def test_database_file_and_schema(store: ObservationStore, tmp_path: Path) -> None:
    assert store.path == tmp_path / "observations.db"
    with sqlite3.connect(store.path) as raw:
        columns = [row[1] for row in raw.execute("PRAGMA table_info(entries)")]
        indexes = {row[1] for row in raw.execute("PRAGMA index_list(entries)")}
        migrations = raw.execute("SELECT version, name FROM schema_migrations").fetchall()
        journal = raw.execute("PRAGMA journal_mode").fetchone()[0]
    for column in ("id", "turn_id", "step_num", "tool", "content_kind", "content", "size_bytes",
                   "summary", "metadata", "created_at", "expires_at"):  # fmt: skip
        assert column in columns
    assert {"entries_turn", "entries_expiry"} <= indexes
    assert migrations == [(1, "entries and content chunks")]
    assert journal == "wal"


def test_migrations_run_once(tmp_path: Path) -> None:
    path = tmp_path / "o.db"
    for _ in range(2):
        ObservationStore(path, settings=Settings(home=tmp_path)).close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == 1


def test_put_and_get_text(store: ObservationStore) -> None:
    entry_id = store.put(LOG, turn_id="t1", step_num=1, tool="fs_read", metadata={"path": "/x"})
    assert len(entry_id) == 16 and int(entry_id, 16) >= 0
    entry = store.get(entry_id)
    assert entry.content == LOG
    info = entry.info
    assert (info.turn_id, info.step_num, info.tool, info.kind) == ("t1", 1, "fs_read", "text")
    assert info.size_bytes == len(LOG.encode())
    assert info.metadata == {"path": "/x"}
    assert info.expires_at == pytest.approx(info.created_at + 3600)
    assert info.summary == summarize(LOG)


def test_put_and_get_binary(store: ObservationStore) -> None:
    data = bytes(range(256)) * 1000
    entry = store.get(store.put(data, turn_id="t1"))
    assert entry.content == data
    assert entry.info.kind == "binary"
    assert (
        entry.info.summary == f"[BINARY: 256000 bytes, sha256={hashlib.sha256(data).hexdigest()}]"
    )


def test_text_summary_keeps_both_ends_and_counts_exactly() -> None:
    text = "A" * 500 + "m" * 1234 + "Z" * 500
    assert summarize(text) == "A" * 500 + "[... 1234 characters omitted ...]" + "Z" * 500
    assert summarize("short") == "short"


def test_small_observation_is_returned_unchanged(store: ObservationStore) -> None:
    observation = {"ok": True, "content": "x" * 100, "path": "/tmp/a"}
    assert store.offload(observation, turn_id="t1") is observation
    assert store.list_for_turn("t1") == []


def test_large_observation_is_offloaded(store: ObservationStore) -> None:
    observation = {"ok": True, "content": LOG, "path": "/tmp/big.log", "encoding": "utf-8"}
    synthetic = store.offload(observation, turn_id="t1", step_num=1, tool="fs_read")
    assert set(synthetic) == {"ok", "observation_id", "size_bytes", "kind", "summary",
                              "metadata", "_note"}  # fmt: skip
    assert synthetic["ok"] is True
    assert synthetic["kind"] == "text"
    assert synthetic["size_bytes"] == len(LOG.encode())
    assert synthetic["metadata"] == {"path": "/tmp/big.log", "encoding": "utf-8"}
    assert synthetic["summary"].endswith("ERROR LAST_EVENT\n")
    assert synthetic["_note"] == OFFLOAD_NOTE
    assert len(json.dumps(synthetic)) < 1500
    assert store.get(synthetic["observation_id"]).content == LOG


def test_threshold_counts_bytes_by_length(tmp_path: Path) -> None:
    with ObservationStore(settings=Settings(home=tmp_path, observation_threshold_bytes=100)) as s:
        small = {"content": b"\x00" * 50}
        assert s.offload(small, turn_id="t") is small
        large = s.offload({"ok": False, "content": b"\x00" * 200, "name": "z"}, turn_id="t")
        assert large["kind"] == "binary" and large["ok"] is False
        assert large["summary"].startswith("[BINARY: 200 bytes, sha256=")


def test_observation_without_content_is_stored_as_json(store: ObservationStore) -> None:
    observation = {"ok": True, "rows": [{"id": i, "name": f"row {i}"} for i in range(500)]}
    synthetic = store.offload(observation, turn_id="t1")
    stored = store.get(synthetic["observation_id"]).content
    assert isinstance(stored, str) and json.loads(stored) == observation


def test_answers_say_which_slice(store: ObservationStore) -> None:
    entry = store.put(LOG, turn_id="t1")
    head = store.read(entry)
    assert head.header() == f"chars 0–2000 of {len(LOG)} ({len(LOG) - 2000} more after)"
    assert head.render().startswith(f"[{entry}: chars 0–2000 of {len(LOG)}")
    tail = store.read(entry, "tail", n=17)
    assert tail.content == "ERROR LAST_EVENT\n"
    assert tail.header() == f"chars {len(LOG) - 17}–{len(LOG)} of {len(LOG)}"
    found = store.read(entry, "grep", pattern="ERROR|number 7$", context=1)
    assert found.matches == 2
    assert found.content.splitlines() == [
        "7-INFO 2026-04-26 event number 6",
        "8:INFO 2026-04-26 event number 7",
        "9-INFO 2026-04-26 event number 8",
        "--",
        "3000-INFO 2026-04-26 event number 2999",
        "3001:ERROR LAST_EVENT",
    ]
    assert found.header() == "grep: 2 matching lines (of 3001 lines)"


def test_grep_reports_all_matches_but_shows_at_most_max(store: ObservationStore) -> None:
    entry = store.put(LOG, turn_id="t1")
    found = store.read(entry, "grep", pattern="INFO", max_matches=3)
    assert (found.matches, found.shown) == (3000, 3)
    assert found.header() == "grep: 3000 matching lines, showing the first 3 (of 3001 lines)"


def test_full_mode_is_capped(tmp_path: Path) -> None:
    with ObservationStore(settings=Settings(home=tmp_path, observation_full_cap_chars=1000)) as s:
        entry = s.put("y" * 5000, turn_id="t")
        with pytest.raises(InvalidInputError, match="head, tail, range, lines or grep"):
            s.read(entry, "full")
        assert len(s.read(entry, "head", n=4000).content) == 1000  # clamped to the cap


def test_turns_are_isolated(store: ObservationStore) -> None:
    mine = store.put("mine", turn_id="t1")
    theirs = store.put("theirs", turn_id="t2")
    assert [info.id for info in store.list_for_turn("t1")] == [mine]
    assert store.read(mine, turn_id="t1").content == "mine"
    with pytest.raises(ObservationNotFoundError, match=f"{theirs}.*another turn"):
        store.read(theirs, turn_id="t1")


def test_expiry_and_gc(store: ObservationStore) -> None:
    short = store.put("short-lived", turn_id="t1", ttl_seconds=0.05)
    kept = store.put("kept", turn_id="t1")
    time.sleep(0.1)
    assert [info.id for info in store.list_for_turn("t1")] == [kept]
    with pytest.raises(ObservationNotFoundError, match=f"{short}.*expired"):
        store.read(short)
    big = store.put("z" * 300_000, turn_id="t1", ttl_seconds=0.05)  # chunked: chunks go too
    time.sleep(0.1)
    assert store.gc() == 2
    assert store.gc() == 0
    with pytest.raises(ObservationNotFoundError, match=f"no observation {big!r}"):
        store.read(big)
    with sqlite3.connect(store.path) as raw:
        assert raw.execute("SELECT count(*) FROM content_chunks").fetchone()[0] == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"entry_id": "0123456789abcdef"}, "no observation '0123456789abcdef'"),
        ({"mode": "everything"}, "mode must be one of"),
        ({"n": 0}, "n must be an integer >= 1"),
        ({"n": -5}, "n must be an integer >= 1"),
        ({"mode": "range", "start": 10, "end": 5}, "end \\(5\\) must be greater than start"),
        ({"mode": "range", "start": -1, "end": 5}, "start must be an integer >= 0"),
        ({"mode": "range"}, "range needs start"),
        ({"mode": "lines", "start": 0}, "start must be an integer >= 1"),
        ({"mode": "lines", "start": 5, "end": 2}, "must not be before start"),
        ({"mode": "grep", "pattern": "([unclosed"}, "invalid regular expression"),
        ({"mode": "grep"}, "grep needs a pattern"),
        ({"mode": "grep", "pattern": "a", "context": 99}, "context must be an integer between"),
    ],
)
def test_bad_reads_are_refused(
    store: ObservationStore, kwargs: dict[str, object], message: str
) -> None:
    entry = store.put(LOG, turn_id="t1")
    entry_id = kwargs.pop("entry_id", entry)
    with pytest.raises((InvalidInputError, ObservationNotFoundError), match=message):
        store.read(entry_id, **kwargs)  # type: ignore[arg-type]
    assert store.read(entry).content == LOG[:2000]  # unchanged


def test_binary_refuses_line_modes(store: ObservationStore) -> None:
    entry = store.put(b"\x00\x01", turn_id="t1")
    with pytest.raises(InvalidInputError, match="is binary"):
        store.read(entry, "grep", pattern="x")


@pytest.mark.parametrize(
    ("content", "kwargs", "message"),
    [
        (123, {"turn_id": "t"}, "content must be str"),
        ("x", {"turn_id": ""}, "turn_id must be a non-empty string"),
        ("x", {"turn_id": "t", "step_num": -1}, "step_num must be"),
        ("x", {"turn_id": "t", "ttl_seconds": 0}, "ttl_seconds must be a number > 0"),
        ("x", {"turn_id": "t", "metadata": {"f": object()}}, "JSON-serializable"),
    ],
)
def test_bad_puts_are_refused(
    store: ObservationStore, content: object, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        store.put(content, **kwargs)  # type: ignore[arg-type]
    assert store.list_all() == []


def test_references_resolve_to_full_content(store: ObservationStore) -> None:
    payload = "{" + '"k": "v", ' * 2000 + "}"
    store.offload({"ok": True, "content": payload, "url": "https://x"}, turn_id="t1", step_num=1)
    store.offload({"ok": True, "content": b"\x00" * 5000}, turn_id="t1", step_num=2)
    args = {
        "path": "/tmp/out.txt",
        "content": "{{step1.content}}",
        "note": "from {{ step1.url }} ({{step1.size_bytes}} bytes)",
        "parts": ["{{step2.content}}", {"deep": "x{{step1.url}}y"}],
        "count": 3,
    }
    resolved = store.resolve_references(args, turn_id="t1")
    assert resolved["content"] == payload
    assert resolved["note"] == f"from https://x ({len(payload)} bytes)"
    assert resolved["parts"] == [b"\x00" * 5000, {"deep": "xhttps://xy"}]
    assert resolved["count"] == 3
    assert args["content"] == "{{step1.content}}"  # the input is not modified


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "{{step9.content}}",
            "no stored observation for step 9 of this turn \\(steps with stored observations: 1\\)",
        ),
        ("{{step1.missing}}", "step 1 has no field 'missing'; fields: content, "),
        ("bytes: {{step1.content}}", None),
    ],
)
def test_bad_references_are_clear(store: ObservationStore, text: str, message: str | None) -> None:
    store.offload({"content": "p" * 5000}, turn_id="t1", step_num=1)
    store.offload({"content": "q" * 5000}, turn_id="other", step_num=9)
    if message is None:
        assert store.resolve_references(text, turn_id="t1") == "bytes: " + "p" * 5000
        return
    with pytest.raises(ObservationError, match=message):
        store.resolve_references({"a": [text]}, turn_id="t1")


def test_binary_inside_text_is_refused(store: ObservationStore) -> None:
    store.offload({"content": b"\x01" * 5000}, turn_id="t1", step_num=1)
    with pytest.raises(ObservationError, match="binary content"):
        store.resolve_references("data={{step1.content}}", turn_id="t1")


def test_lone_surrogates_are_stored(store: ObservationStore) -> None:
    text = "bad \udcff byte " * 400
    entry = store.put(text, turn_id="t1", metadata={"path": "/tmp/\udcff"})
    assert store.get(entry).content == text
    assert store.info(entry).metadata == {"path": "/tmp/\udcff"}
    assert "\\udcff" in store.info(entry).summary
    synthetic = store.offload({"content": text}, turn_id="t1")
    assert store.get(synthetic["observation_id"]).content == text
    with pytest.raises(InvalidInputError, match="tool contains characters"):
        store.put("x", turn_id="t1", tool="\udcff")


def test_large_fields_besides_content_are_not_kept_in_the_summary(
    store: ObservationStore,
) -> None:
    observation = {"ok": True, "content": "x", "matches": ["y" * 100] * 1000, "path": "/p"}
    synthetic = store.offload(observation, turn_id="t1")
    assert len(json.dumps(synthetic)) < 2000
    assert synthetic["metadata"] == {"path": "/p"}
    assert json.loads(store.get(synthetic["observation_id"]).content) == observation


@pytest.mark.parametrize(
    ("observation", "message"),
    [({("a", "b"): "x" * 5000}, "cannot be serialized"), ([1, 2], "must be a dict")],
)
def test_bad_observations_are_refused(
    store: ObservationStore, observation: object, message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        store.offload(observation, turn_id="t1")  # type: ignore[arg-type]
    assert store.list_all() == []


def test_step_numbers_must_fit(store: ObservationStore) -> None:
    with pytest.raises(InvalidInputError, match="step_num must be an integer"):
        store.put("x", turn_id="t1", step_num=2**70)


def test_reference_text_around_is_kept_exactly(store: ObservationStore) -> None:
    store.offload({"ok": False, "content": "F" * 5000}, turn_id="t1", step_num=1)
    resolved = store.resolve_references(
        {"a": " {{step1.content}}\n", "b": "{{step1.ok}}"}, turn_id="t1"
    )
    assert resolved == {"a": " " + "F" * 5000 + "\n", "b": False}


@pytest.mark.parametrize("text", ["{{step1.}}", "{{step1.content.x}}", "x {{step1.foo-bar}}"])
def test_malformed_references_are_refused(store: ObservationStore, text: str) -> None:
    store.offload({"content": "F" * 5000}, turn_id="t1", step_num=1)
    with pytest.raises(ObservationError, match="malformed reference"):
        store.resolve_references(text, turn_id="t1")


def test_out_of_range_reads_are_refused(store: ObservationStore) -> None:
    entry = store.put("one\ntwo\nthree\n", turn_id="t1")
    with pytest.raises(InvalidInputError, match="start \\(10\\) is past the end: the content "
                                                "has 3 lines"):  # fmt: skip
        store.read(entry, "lines", start=10)
    with pytest.raises(InvalidInputError, match="has 14 characters"):
        store.read(entry, "range", start=100, end=200)


def test_chunk_size_must_hold_a_character(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="chunk_bytes must be at least 4"):
        ObservationStore(tmp_path / "o.db", settings=Settings(home=tmp_path), chunk_bytes=2)


def test_many_short_lived_threads_share_few_connections(store: ObservationStore) -> None:
    import os
    import threading

    def open_fds() -> int:
        """Descriptors on the store's files (db, wal, shm): what other work of this
        process opens meanwhile does not count."""
        found = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            found += target.startswith(str(store.path))
        return found

    store.put("warm up", turn_id="t")
    before = open_fds()
    for _ in range(20):
        threads = [
            threading.Thread(target=store.put, args=("x",), kwargs={"turn_id": "t"})
            for _ in range(20)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(store.list_for_turn("t")) == 401
    # at most the pool's idle connections stay open (db, wal and shm files each)
    assert open_fds() - before <= 3 * MAX_IDLE
