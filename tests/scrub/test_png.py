"""PNG text chunks stripped, the image kept valid; malformed PNGs left out, saying so."""

from __future__ import annotations

import base64
import struct
import zlib

from scratchpad.scrub import BAD_PNG, scrub_bundle
from scratchpad.scrub.png import strip_text_chunks
from tests.scrub.careless import png_with_text

SECRET = "Zq9xK2mW7pLr4Tn8-secret"


def chunks(data: bytes) -> list[bytes]:
    """The kinds of ``data``'s chunks, each CRC checked."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    kinds, position = [], 8
    while position < len(data):
        (length,) = struct.unpack_from(">I", data, position)
        kind, body = data[position + 4 : position + 8], data[position + 8 : position + 8 + length]
        assert struct.unpack_from(">I", data, position + 8 + length)[0] == zlib.crc32(kind + body)
        kinds.append(kind)
        position += 12 + length
    return kinds


def test_text_chunks_go_and_the_image_stays_valid() -> None:
    data = png_with_text(SECRET)
    assert chunks(data) == [b"IHDR", b"tEXt", b"zTXt", b"iTXt", b"IDAT", b"IEND"]
    stripped = strip_text_chunks(data + b"trailing " + SECRET.encode())
    assert stripped is not None and SECRET.encode() not in stripped
    assert chunks(stripped) == [b"IHDR", b"IDAT", b"IEND"]
    idat = stripped[stripped.index(b"IDAT") + 4 : stripped.index(b"IEND") - 8]
    assert zlib.decompress(idat) == b"\0\xff\x00\x00"  # the pixel, intact


def test_an_image_without_text_is_passed_as_it_is() -> None:
    plain = strip_text_chunks(png_with_text(SECRET))
    assert plain is not None and strip_text_chunks(plain) is plain
    encoded = base64.b64encode(plain).decode()
    assert scrub_bundle({"image/png": encoded})["image/png"] is encoded


def test_a_bundle_loses_its_png_text_and_a_malformed_png() -> None:
    encoded = base64.b64encode(png_with_text(SECRET)).decode()
    bundle = scrub_bundle({"image/png": encoded, "text/plain": "a figure"})
    assert chunks(base64.b64decode(bundle["image/png"])) == [b"IHDR", b"IDAT", b"IEND"]
    assert bundle["text/plain"] == "a figure"
    cut_short = base64.b64encode(png_with_text(SECRET)[:60]).decode()
    assert scrub_bundle({"image/png": cut_short}) == {"text/plain": BAD_PNG}
    assert scrub_bundle({"image/png": "not base64 at all!"}) == {"text/plain": BAD_PNG}
    assert strip_text_chunks(b"GIF89a...") is None
