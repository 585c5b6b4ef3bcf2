"""The ``read_image`` tool: a PNG or JPEG (a file, or a pad's image output) for vision models."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from scratchpad.errors import InvalidInputError
from scratchpad.llm.messages import ImageBlock, TextBlock
from scratchpad.runtime.files import Workspace, clean_path, workspace
from scratchpad.scrub.png import strip_text_chunks
from scratchpad.tools.base import ToolDef
from scratchpad.tools.cell_result import image_blocks
from scratchpad.tools.context import ToolSessionContext

NAME = "read_image"
MAX_IMAGE_BYTES = 5 * 1024 * 1024
SIGNATURES = {b"\x89PNG\r\n\x1a\n": "image/png", b"\xff\xd8\xff": "image/jpeg"}
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "A PNG or JPEG file: absolute, or relative to `pad`'s directory.",
        },
        "pad": {
            "type": "string",
            "description": "The pad whose directory a relative `path` is in; without `path`, "
            "a pad whose cell made an image.",
        },
        "cell": {"type": "integer", "description": "Cell index in the pad (default -1, last)."},
        "output": {"type": "integer", "description": "Which image of that cell (default 0)."},
    },
}
DESCRIPTION = (
    "Look at an image: a PNG/JPEG file by `path` (a relative one in `pad`'s working "
    "directory), or an image a pad's cell produced (`pad`, optional `cell` index, default the "
    "last cell)."
)


def read_image_tool() -> ToolDef:
    """The ``read_image`` tool: an image file shown to the model."""
    return ToolDef(NAME, DESCRIPTION, INPUT_SCHEMA, handle_read_image)


async def handle_read_image(
    context: ToolSessionContext, tool_input: dict[str, Any]
) -> list[TextBlock | ImageBlock]:
    if tool_input.get("path"):
        path = Path(str(tool_input["path"])).expanduser()
        if not path.is_absolute():  # where the pad's cells find it
            path = _in_working_directory(context, str(tool_input["path"]), tool_input.get("pad"))
        return _from_file(path)
    if tool_input.get("pad"):
        return _from_pad(context, str(tool_input["pad"]), tool_input)
    raise InvalidInputError("give `path` (a PNG/JPEG file) or `pad` (a pad with an image output)")


def _in_working_directory(context: ToolSessionContext, rel: str, pad: object) -> Path:
    """A relative path in ``pad``'s working directory (the bound workspace needs no pad),
    checked as the files API checks it: no way out, nothing of the home."""
    manager = context.manager
    if pad:
        files = workspace(manager, str(pad))
    elif manager.workspace is not None:
        files = Workspace.of(manager.workspace, hidden=(manager.settings.home,))
    else:
        raise InvalidInputError(
            f"{rel!r} is a relative path: give `pad` too (each pad has a directory of its own) "
            "or an absolute path"
        )
    return files.locate(clean_path(rel))


def _from_file(path: Path) -> list[TextBlock | ImageBlock]:
    if not path.is_file():
        raise InvalidInputError(f"{path} is not a file")
    with path.open("rb") as handle:
        data = handle.read(MAX_IMAGE_BYTES + 1)  # never more, whatever the size claims
    size = len(data)
    if size > MAX_IMAGE_BYTES:
        raise InvalidInputError(f"{path} is larger than {MAX_IMAGE_BYTES} bytes")
    media_type = next((m for sig, m in SIGNATURES.items() if data.startswith(sig)), None)
    if media_type is None:
        raise InvalidInputError(f"{path} is not a PNG or JPEG image")
    if media_type == "image/png":  # its text chunks could hold anything, a secret too
        stripped = strip_text_chunks(data)
        if stripped is None:
            raise InvalidInputError(f"{path} is not a well-formed PNG image")
        data = stripped
    encoded = base64.b64encode(data).decode("ascii")
    return [TextBlock(f"{path} ({media_type}, {size} bytes)"), ImageBlock(media_type, encoded)]


def _from_pad(
    context: ToolSessionContext, name: str, tool_input: dict[str, Any]
) -> list[TextBlock | ImageBlock]:
    pad = context.manager.peek(name)
    index = tool_input.get("cell", -1)
    try:
        cell = pad.cells[index]
    except (IndexError, TypeError):
        raise InvalidInputError(
            f"pad {name!r} has {len(pad.cells)} cells; no cell {index}"
        ) from None
    images = image_blocks(cell)
    which = tool_input.get("output", 0)
    if not images or not 0 <= which < len(images):
        raise InvalidInputError(f"cell {index} of pad {name!r} has {len(images)} image outputs")
    return [TextBlock(f"image {which} of cell {index} in pad {name!r}"), images[which]]
