"""Framing of the control channel between a pad's parent process and its kernel.

Standard library only: the worker imports this file at boot. A frame is a 4-byte big-endian
length followed by that many bytes of UTF-8 JSON. The channel runs on its own pipes, never on
the kernel's stdout, so nothing user code prints can be mistaken for a frame.

A cell can still write to the kernel's end of the channel (its fd is on the command line), so
the parent treats every frame from the kernel as untrusted input: a length over
``KERNEL_FRAME_CAP`` is refused before any of its body is buffered, a large frame's JSON is
counted before it is decoded (``MAX_VALUES``), and frames are bound to the cell or request
they answer by their ``id``. The kernel never sends a frame the parent would refuse: it encodes
large frames with ``encode_bounded`` (structural characters inside strings escaped, so the
count is exact) and turns a display that does not fit into a note.

Messages, parent → kernel::

    {"type": "execute", "code": str, "id": str, "number": int}   number: the cell's in its pad
    {"type": "set_env", "env": {name: str | None}, "id": str}   None removes the variable
    {"type": "refresh_imports", "id": str}  after packages were installed into the venv
    {"type": "which_installed", "names": [str], "id": str}
    {"type": "sync", "nonce": str}          after a bad frame: answered once the kernel is idle
    {"type": "shutdown"}

kernel → parent (``id``: the cell's, or the request's)::

    {"type": "ready", "pid": int, "python": "3.11.7"}
    {"type": "started", "id": str}          the cell runs: from now on SIGINT interrupts it
    {"type": "heartbeat"}                   every few seconds while a cell runs (own thread)
    {"type": "progress", "id": str, "message": str}
    {"type": "log", "id": str, "message": str}   a ``logging`` record (INFO and up): logs only
    {"type": "display", "id": str, "data": {mime: data}}
    {"type": "result", "id": str, "data": {mime: data}}   rich forms of the result (before done)
    {"type": "done", "id": str, "status": "ok"|"error"|"interrupted", "result": str|None,
     "error": str|None}
    {"type": "installed", "id": str, "names": [str]}
    {"type": "ack", "id": str}
    {"type": "synced", "nonce": str}
"""

from __future__ import annotations

import json
import os
import struct

HEADER = struct.Struct(">I")
MAX_FRAME = 1 << 30  # frames to the kernel (the server's own, e.g. a cell's code): garbage only
# Frames from the kernel. Twice the default display cap (8 MiB a cell): a display the server
# keeps (at most half of that cap) fits with room for JSON escapes; decoding one full frame
# holds the interpreter for tens of milliseconds at most.
KERNEL_FRAME_CAP = 16 << 20
LARGE_FRAME = 64 << 10  # from this size a kernel frame is counted, and decoded off the loop
MAX_VALUES = 100_000  # JSON values in a large kernel frame: bounds the memory of decoding it
_ESCAPES = ((",", "\\u002c"), ("[", "\\u005b"), ("{", "\\u007b"))


class ProtocolError(Exception):
    """The peer sent bytes that are not a valid frame."""


class FrameTooBig(ProtocolError):
    """A message the kernel may not send as it is: the parent would refuse the frame."""


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # built once: hot path


def encode(message: dict[str, object]) -> bytes:
    """One frame: header + compact JSON (non-ASCII kept as UTF-8)."""
    body = _ENCODER.encode(message).encode("utf-8", "surrogatepass")
    return HEADER.pack(len(body)) + body


def encode_bounded(message: dict[str, object]) -> bytes:
    """A frame from the kernel, one the parent accepts; FrameTooBig when it cannot be one.

    When a large frame's strings hold so many structural characters that the parent's count
    of its values (:func:`value_bound`) goes over the limit, it is encoded again with those
    characters escaped, so the count is exact.
    """
    body = _ENCODER.encode(message).encode("utf-8", "surrogatepass")
    if len(body) < LARGE_FRAME:
        return HEADER.pack(len(body)) + body
    if len(body) <= KERNEL_FRAME_CAP and value_bound(body) > MAX_VALUES:
        body = _escaped(message).encode("utf-8", "surrogatepass")
        if value_bound(body) > MAX_VALUES:
            raise FrameTooBig(f"{len(body):,} bytes with more than {MAX_VALUES:,} JSON values")
    if len(body) > KERNEL_FRAME_CAP:
        raise FrameTooBig(f"{len(body):,} bytes, over the {KERNEL_FRAME_CAP >> 20} MiB frame cap")
    return HEADER.pack(len(body)) + body


def _escaped(value: object) -> str:
    """JSON of ``value`` (already known to encode) with ``,``, ``[`` and ``{`` inside strings
    written as ``\\uXXXX``: then those bytes appear only as structure."""
    if isinstance(value, str):
        text = _ENCODER.encode(value)
        for char, escape in _ESCAPES:
            if char in text:
                text = text.replace(char, escape)
        return text
    if isinstance(value, dict):
        items = (
            _escaped(key if isinstance(key, str) else _ENCODER.encode(key)) + ":" + _escaped(item)
            for key, item in value.items()
        )
        return "{" + ",".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_escaped(item) for item in value) + "]"
    return _ENCODER.encode(value)


def value_bound(body: bytes) -> int:
    """At least the number of values in the JSON text ``body`` (each container and each
    element after a container's first one needs one of ``{ [ ,``)."""
    return body.count(b",") + body.count(b"[") + body.count(b"{") + 1


def decode(body: bytes) -> dict[str, object]:
    """A kernel frame's message; ProtocolError when it is not one (never more than a bounded
    amount of memory spent on finding out)."""
    if len(body) >= LARGE_FRAME and value_bound(body) > MAX_VALUES:
        raise ProtocolError(f"a frame of {len(body):,} bytes holds more than {MAX_VALUES:,} values")
    try:
        message = json.loads(body.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ProtocolError(f"a frame that is not JSON ({str(exc)[:100]})") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ProtocolError("a frame that is not a JSON object with a type")
    return message


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
    try:
        message = json.loads(body.decode("utf-8", "surrogatepass"))
    except ValueError as exc:  # e.g. a cell wrote into the kernel's input
        raise ProtocolError(f"a frame that is not JSON ({str(exc)[:100]})") from None
    if not isinstance(message, dict):
        raise ProtocolError("a frame must hold a JSON object")
    return message


class FrameReader:
    """Splits the kernel's byte stream (fed as it arrives) into frame bodies.

    A length is checked before its body is buffered, so the reader never holds more than one
    frame under the cap and one read. After a bad frame the stream cannot be trusted to be
    aligned: :meth:`lose` discards everything until an agreed frame (the kernel's answer to a
    ``sync``) appears, and reading resumes with it.
    """

    def __init__(self, cap: int = KERNEL_FRAME_CAP) -> None:
        self._buffer = bytearray()
        self._cap = cap
        self._until: bytes | None = None  # while lost: the frame that ends the loss

    @property
    def lost(self) -> bool:
        return self._until is not None

    @property
    def buffered(self) -> int:
        """Bytes held: a frame under way, or while lost the tail a match could start in."""
        return len(self._buffer)

    def feed(self, data: bytes) -> None:
        if self._until is None:
            self._buffer += data
            return
        self._buffer += data
        self._scan()

    def next(self) -> bytes | None:
        """The next whole body, None when there is none yet (or the reader is lost).

        ProtocolError for a length over the cap: its header is consumed; call :meth:`lose`.
        """
        buffer = self._buffer
        if self._until is not None or len(buffer) < HEADER.size:
            return None
        (length,) = HEADER.unpack_from(buffer)
        if length > self._cap:
            del buffer[: HEADER.size]
            raise ProtocolError(f"a frame of {length:,} bytes, over the {self._cap >> 20} MiB cap")
        end = HEADER.size + length
        if len(buffer) < end:
            return None
        if length < LARGE_FRAME:
            body = bytes(buffer[HEADER.size : end])
        else:  # one copy, not two
            with memoryview(buffer) as view:
                body = view[HEADER.size : end].tobytes()
        del buffer[:end]
        return body

    def lose(self, until: bytes) -> None:
        """Discard the stream up to the frame ``until`` (whole: header and body)."""
        self._until = until
        self._scan()

    def _scan(self) -> None:
        until = self._until
        assert until is not None
        buffer = self._buffer
        found = buffer.find(until)
        if found >= 0:
            del buffer[:found]  # the agreed frame is read next, like any other
            self._until = None
        elif len(buffer) >= len(until):
            del buffer[: len(buffer) - len(until) + 1]
