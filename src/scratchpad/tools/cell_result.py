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


def cell_text(cell: Cell) -> str:
    sections = [
        (label, text)
        for label, text in (
            ("output", cell.stdout),
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
