"""Well-formed PNG images for tests (a display, the chat and read_image keep only those)."""

from __future__ import annotations

import inspect
import struct
import zlib


def png(width: int = 1, height: int = 1, *, seed: int = 0) -> bytes:
    """A valid RGB PNG of ``width`` x ``height`` pixels; with ``seed``, pixels that do not
    compress (a large image stays large)."""
    import random

    pixels = random.Random(seed).randbytes(width * 3) if seed else bytes(width * 3)
    raw = b"".join(b"\0" + pixels for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 0 if seed else 9))
        + chunk(b"IEND", b"")
    )


PNG = png()
# The source of png(), for a cell to make images of its own (it runs in the pad).
MAKE_PNG = "import struct, zlib\n" + inspect.getsource(png)
