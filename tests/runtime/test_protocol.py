"""Control-channel framing: whole frames out, whatever way the bytes are split."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scratchpad.runtime.inkernel import protocol

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(st.lists(st.dictionaries(st.text(), json_values), max_size=5), st.data())
def test_decoder_reassembles_frames_split_anywhere(
    messages: list[dict[str, object]], data: st.DataObject
) -> None:
    stream = b"".join(protocol.encode(message) for message in messages)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    decoder = protocol.FrameDecoder()
    decoded: list[dict[str, object]] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        decoded.extend(decoder.feed(stream[start:cut]))
        start = cut
    assert decoded == messages


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


def test_oversized_or_non_object_frames_are_rejected() -> None:
    with pytest.raises(protocol.ProtocolError, match="exceeds"):
        protocol.FrameDecoder().feed(b"\xff\xff\xff\xff")
    with pytest.raises(protocol.ProtocolError, match="JSON object"):
        protocol.FrameDecoder().feed(protocol.HEADER.pack(2) + b"[]")
