"""Framing of the control channel between a pad's parent process and its kernel.

Standard library only: the worker imports this file at boot. A frame is a 4-byte big-endian
length followed by that many bytes of UTF-8 JSON. The channel runs on its own pipes, never on
the kernel's stdout, so nothing user code prints can be mistaken for a frame.

Messages, parent → kernel::

    {"type": "execute", "code": str, "id": str}
    {"type": "set_env", "env": {name: str | None}}   None removes the variable
    {"type": "refresh_imports"}             after packages were installed into the venv
    {"type": "which_installed", "names": [str]}
    {"type": "shutdown"}

kernel → parent::

    {"type": "ready", "pid": int, "python": "3.11.7"}
    {"type": "started", "id": str}          the cell runs: from now on SIGINT interrupts it
    {"type": "heartbeat"}                   every few seconds while a cell runs (own thread)
    {"type": "progress", "message": str}
    {"type": "display", "data": {mime: data}}
    {"type": "done", "status": "ok"|"error"|"interrupted", "result": str|None, "error": str|None}
    {"type": "installed", "names": [str]}
    {"type": "ack"}
"""

from __future__ import annotations

import json
import os
import struct

HEADER = struct.Struct(">I")
MAX_FRAME = 1 << 30  # 1 GiB: far above any sane message, low enough to catch garbage


class ProtocolError(Exception):
    """The peer sent bytes that are not a valid frame."""


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # built once: hot path


def encode(message: dict[str, object]) -> bytes:
    """One frame: header + compact JSON (non-ASCII kept as UTF-8)."""
    body = _ENCODER.encode(message).encode("utf-8", "surrogatepass")
    return HEADER.pack(len(body)) + body


def write_all(fd: int, data: bytes) -> None:
    """Write every byte to a blocking fd (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_exact(fd: int, size: int) -> bytes | None:
    """Read exactly ``size`` bytes from a blocking fd; None on EOF before the first byte."""
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = os.read(fd, remaining)
        if not chunk:
            if chunks:
                raise ProtocolError(f"channel closed mid-frame ({size - remaining}/{size} bytes)")
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_frame(fd: int) -> dict[str, object] | None:
    """Read one message from a blocking fd; None when the peer closed the channel."""
    header = read_exact(fd, HEADER.size)
    if header is None:
        return None
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME:
        raise ProtocolError(f"frame of {length} bytes exceeds the {MAX_FRAME}-byte limit")
    body = read_exact(fd, length) if length else b""
    if body is None:
        raise ProtocolError("channel closed between header and body")
    return _decode(body)


def _decode(body: bytes) -> dict[str, object]:
    message = json.loads(body.decode("utf-8", "surrogatepass"))
    if not isinstance(message, dict):
        raise ProtocolError("a frame must hold a JSON object")
    return message


class FrameDecoder:
    """Incremental decoder for a non-blocking reader: feed bytes, get whole messages."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[dict[str, object]]:
        buffer = self._buffer
        buffer += data
        messages: list[dict[str, object]] = []
        offset = 0
        size = len(buffer)
        while size - offset >= HEADER.size:
            (length,) = HEADER.unpack_from(buffer, offset)
            if length > MAX_FRAME:
                raise ProtocolError(f"frame of {length} bytes exceeds the {MAX_FRAME}-byte limit")
            end = offset + HEADER.size + length
            if end > size:
                break
            messages.append(_decode(bytes(buffer[offset + HEADER.size : end])))
            offset = end
        if offset:
            del buffer[:offset]
        return messages
