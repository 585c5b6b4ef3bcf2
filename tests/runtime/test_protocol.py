"""Control-channel framing: whole frames out, whatever way the bytes are split, and nothing the
kernel sends makes the parent buffer or decode more than a bounded amount."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpad.runtime.inkernel import protocol

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)
messages = st.dictionaries(st.text(), json_values).map(lambda m: {**m, "type": "t"})
MIB = 1 << 20


def read_all(reader: protocol.FrameReader) -> list[dict[str, object]]:
    decoded = []
    while (body := reader.next()) is not None:
        decoded.append(protocol.decode(body))
    return decoded


@given(st.lists(messages, max_size=5), st.data())
def test_reader_reassembles_frames_split_anywhere(
    sent: list[dict[str, object]], data: st.DataObject
) -> None:
    stream = b"".join(protocol.encode(message) for message in sent)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    reader = protocol.FrameReader()
    decoded: list[dict[str, object]] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        reader.feed(stream[start:cut])
        decoded.extend(read_all(reader))
        start = cut
    assert decoded == sent


@settings(max_examples=30, deadline=None)
@given(messages)
def test_a_large_frame_from_the_kernel_decodes_to_what_was_sent(message: dict[str, object]) -> None:
    """The escaped encoding of large frames is still the same JSON, and its count of values
    is exact: structural characters inside strings do not count."""
    message = {**message, "pad": ",[{" * protocol.LARGE_FRAME}
    frame = protocol.encode_bounded(message)
    body = frame[protocol.HEADER.size :]
    assert protocol.decode(body) == message
    assert protocol.value_bound(body) == 1 + structure(message)  # the pad's: none


def structure(value: object) -> int:
    """How many ``{``, ``[`` and ``,`` the JSON of ``value`` needs."""
    if isinstance(value, dict):
        value = list(value.values())
    elif not isinstance(value, list):
        return 0
    return 1 + max(len(value) - 1, 0) + sum(structure(item) for item in value)


def test_blocking_read_and_write_over_a_pipe() -> None:
    read_fd, write_fd = os.pipe()
    try:
        protocol.write_all(write_fd, protocol.encode({"type": "ready", "text": "ü" * 10}))
        assert protocol.read_frame(read_fd) == {"type": "ready", "text": "ü" * 10}
        os.close(write_fd)
        write_fd = -1
        assert protocol.read_frame(read_fd) is None
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


def test_a_length_over_the_cap_is_refused_before_any_of_its_body_is_buffered() -> None:
    """400 MB announced and streamed: the reader holds at most one read at a time, and picks
    the stream up again at the agreed frame (the kernel's answer to a sync)."""
    reader = protocol.FrameReader()
    reader.feed(protocol.HEADER.pack(400_000_000) + b"\0" * 1000)
    with pytest.raises(protocol.ProtocolError, match="400,000,000 bytes, over the 16 MiB cap"):
        reader.next()
    answer = protocol.encode({"type": "synced", "nonce": "n1"})
    reader.lose(answer)
    chunk = b"\0" * MIB
    for _ in range(400):
        reader.feed(chunk)
        assert reader.next() is None
        assert reader.buffered < len(answer) + len(chunk)
    reader.feed(chunk[:1000] + answer[:10])
    reader.feed(answer[10:] + protocol.encode({"type": "after"}))
    assert read_all(reader) == [{"type": "synced", "nonce": "n1"}, {"type": "after"}]
    assert reader.buffered == 0


def test_a_frame_under_the_cap_is_buffered_only_up_to_its_length() -> None:
    reader = protocol.FrameReader()
    body = json.dumps({"type": "display", "data": {"text/plain": "x" * (2 * MIB)}}).encode()
    frame = protocol.HEADER.pack(len(body)) + body + protocol.encode({"type": "next"})
    for start in range(0, len(frame), 64 * 1024):
        reader.feed(frame[start : start + 64 * 1024])
        assert reader.buffered <= len(body) + protocol.HEADER.size + 64 * 1024
    assert [message["type"] for message in read_all(reader)] == ["display", "next"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[]", "not a JSON object with a type"),
        (b'{"type": 3}', "not a JSON object with a type"),
        (b"[" * 100_000 + b"]" * 100_000, "values"),  # deeper than json can go
        (b"[" * 50_000 + b"]" * 50_000, "not JSON"),  # small enough to try: too deep
        (b'{"type":"t","x":"' + b"1" * 5000 + b'"}', ""),  # fine: a long string
    ],
)
def test_bodies_that_are_not_messages_are_refused(body: bytes, words: str) -> None:
    if not words:
        assert protocol.decode(body)["type"] == "t"
        return
    with pytest.raises(protocol.ProtocolError, match=words):
        protocol.decode(body)


def test_a_large_frame_with_too_many_values_is_refused_before_it_is_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """16 MiB of ``[],`` would decode to 400 MiB of lists: it is counted, never decoded."""
    body = b'{"type":"display","data":[' + b"[]," * (5 * MIB) + b"[]]}"
    monkeypatch.setattr(json, "loads", _never_called)
    with pytest.raises(protocol.ProtocolError, match="more than 100,000 values"):
        protocol.decode(body)


def _never_called(*args: object, **kwargs: object) -> object:
    raise AssertionError("decoded")


def test_the_kernel_never_encodes_a_frame_the_parent_refuses() -> None:
    with pytest.raises(protocol.FrameTooBig, match=r"^17,825,[0-9]+ bytes, over the 16 MiB frame"):
        protocol.encode_bounded({"type": "display", "data": {"text/plain": "x" * (17 * MIB)}})
    with pytest.raises(protocol.FrameTooBig, match="bytes with more than 100,000 JSON values"):
        protocol.encode_bounded({"type": "display", "data": {"application/json": [0] * 200_000}})
    text = "a, [b], {c}, " * 100_000  # 1.3 MB of text full of structural characters
    frame = protocol.encode_bounded({"type": "display", "data": {"text/plain": text}})
    assert protocol.decode(frame[protocol.HEADER.size :])["data"] == {"text/plain": text}
