"""``scratchpad exec --save-images DIR``: a cell's images as files a person or a script opens."""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

from scratchpad.fsutil import atomic_write_bytes
from scratchpad.runtime.cell import Cell

SUFFIXES = {"image/png": ".png", "image/jpeg": ".jpg", "image/svg+xml": ".svg"}


def save_images(cell: Cell, directory: Path) -> list[Path]:
    """Write each image output of ``cell`` (PNG, JPEG, SVG; one file per output, in the order
    the cell made them) into ``directory`` as ``cell-<id>-<n>.<ext>``; their paths."""
    paths: list[Path] = []
    for bundle in cell.outputs:
        mime = next((mime for mime in SUFFIXES if mime in bundle), None)
        if mime is None:
            continue
        data = _image_bytes(mime, bundle[mime])
        if data is None:
            continue
        path = directory / f"cell-{cell.id}-{len(paths) + 1}{SUFFIXES[mime]}"
        atomic_write_bytes(path, data)
        paths.append(path)
    return paths


def _image_bytes(mime: str, value: object) -> bytes | None:
    """The file's bytes: SVG is text, PNG and JPEG are base64 (None when it does not decode)."""
    text = "".join(value) if isinstance(value, list) else str(value)
    if mime == "image/svg+xml":
        return text.encode("utf-8")
    try:
        return base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        return None
