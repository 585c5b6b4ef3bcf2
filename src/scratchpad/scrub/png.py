"""PNG images without their text: ``tEXt``, ``zTXt`` and ``iTXt`` chunks (and ``eXIf``) can
carry any string, a secret too, and zTXt is compressed, so no scrubbing of text would see it.

An image is stripped before it is stored or sent: its chunks are walked and copied but for
those, so the image stays valid (every chunk keeps its own CRC). Bytes that are not a PNG as
the format has it (a bad signature, a chunk running past the end, nothing after ``IEND``
allowed) come back as None: the caller drops the image.
"""

from __future__ import annotations

import base64
import binascii
import struct

SIGNATURE = b"\x89PNG\r\n\x1a\n"
TEXT_CHUNKS = frozenset({b"tEXt", b"zTXt", b"iTXt", b"eXIf"})
_LENGTH = struct.Struct(">I")


def strip_text_chunks(data: bytes) -> bytes | None:
    """``data`` without its text chunks (``data`` itself when it has none), or None when it
    is not a well-formed PNG."""
    if not data.startswith(SIGNATURE):
        return None
    kept = [SIGNATURE]
    position = len(SIGNATURE)
    dropped = False
    while position + 12 <= len(data):
        (length,) = _LENGTH.unpack_from(data, position)
        end = position + 12 + length
        if end > len(data):
            return None
        kind = data[position + 4 : position + 8]
        if kind in TEXT_CHUNKS:
            dropped = True
        else:
            kept.append(data[position:end])
        position = end
        if kind == b"IEND":
            break
    else:
        return None  # no IEND: cut short
    if position != len(data):
        dropped = True  # what follows IEND is no part of the image
    return b"".join(kept) if dropped else data


def strip_png_text(encoded: str) -> str | None:
    """A base64 PNG (as a display bundle holds it) without its text chunks; None when it is
    not one."""
    try:
        data = base64.b64decode(encoded, validate=False)
    except (binascii.Error, ValueError):
        return None
    stripped = strip_text_chunks(data)
    if stripped is None:
        return None
    return encoded if stripped is data else base64.b64encode(stripped).decode("ascii")
