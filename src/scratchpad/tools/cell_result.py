"""A cell as the model reads it: labelled sections, images as image blocks, large output
offloaded to the observation store (the model gets the summary and the id; on a full disk,
its head and tail and why)."""

from __future__ import annotations

import json

from scratchpad.errors import DiskFullError
from scratchpad.llm.messages import ImageBlock, TextBlock
from scratchpad.runtime.cell import Cell
from scratchpad.text import cut_middle
from scratchpad.tools.base import ToolOutcome
from scratchpad.tools.context import ToolSessionContext

NO_OUTPUT = "Code executed successfully (no output)."
IMAGE_MIMES = ("image/png", "image/jpeg")
TEXT_MIMES = ("text/markdown", "text/plain")  # the first a display has is what the model reads


def cell_text(cell: Cell) -> str:
    sections = [
        (label, text)
        for label, text in (
            ("output", cell.stdout),
            ("display", displays_text(cell)),
            ("result", cell.result),
            ("logs", cell.logs),
            ("stderr", cell.stderr),
            ("error", cell.error),
        )
        if text
    ]
    if not sections:
        return NO_OUTPUT
    return "\n\n".join(f"[{label}]\n{text.rstrip()}" for label, text in sections)


def displays_text(cell: Cell) -> str:
    """What the cell displayed, as text: each display's markdown or plain text form (a
    display dropped for size is a plain-text note saying so), images as a note (they come as
    image blocks beside the text), one line per display without a text form."""
    return "\n".join(display_text(bundle) for bundle in cell.outputs)


def display_text(bundle: dict[str, object]) -> str:
    images = [mime for mime in IMAGE_MIMES if isinstance(bundle.get(mime), str)]
    if images:
        return f"[image ({images[0]}), attached]"
    for mime in TEXT_MIMES:
        text = bundle.get(mime)
        if isinstance(text, str):
            return text.rstrip("\n")
    kinds = ", ".join(sorted(bundle)) or "nothing"
    return f"[a display ({kinds}) with no text form]"


def cell_outcome(cell: Cell, pad: str, context: ToolSessionContext) -> ToolOutcome:
    text = context.scrub(cell_text(cell))
    store = context.store
    if store is not None:
        try:
            shown = store.offload(
                {"ok": cell.ok, "content": text, "pad": pad, "status": cell.status},
                turn_id=context.turn_id,
                step_num=context.step_num,
                tool="scratchpad",
            )
        except DiskFullError as exc:  # the cell ran: its head and tail rather than nothing
            cap = store.settings.observation_threshold_bytes
            text = f"[not saved as an observation: {exc}]\n{cut_middle(text, cap)}"
        else:
            if "observation_id" in shown:
                text = offloaded_text(shown)
    blocks: list[TextBlock | ImageBlock] = [TextBlock(text), *image_blocks(cell)]
    return ToolOutcome(
        blocks if len(blocks) > 1 else text, ok=cell.ok, reason=None if cell.ok else cell.status
    )


def image_blocks(cell: Cell) -> list[ImageBlock]:
    """The cell's image outputs (one per display, PNG preferred) as image blocks."""
    blocks = []
    for bundle in cell.outputs:
        mime = next((m for m in IMAGE_MIMES if isinstance(bundle.get(m), str)), None)
        if mime is not None:
            blocks.append(ImageBlock(mime, bundle[mime]))
    return blocks


def offloaded_text(shown: dict[str, object]) -> str:
    """The synthetic observation of a large cell result, as text for the model."""
    metadata = json.dumps(shown.get("metadata", {}), ensure_ascii=False)
    return (
        f"[large output saved as observation {shown['observation_id']}: "
        f"{shown['size_bytes']} bytes; {shown['_note']}]\n"
        f"[metadata] {metadata}\n[summary]\n{shown['summary']}"
    )
