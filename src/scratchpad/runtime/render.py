"""Views of a pad's cells shared by every backend: text view, dump, notebook, compaction.

Each cell is shown with its own number (``Cell.number``, fixed when it was queued), the same
in every view; a cell that stands for others (number 0) is shown without one.
"""

from __future__ import annotations

import hashlib
from typing import Any

from scratchpad.runtime.cell import CELL_ID, Cell, in_order

DUMP_MAX_LINES = 20
DUMP_MAX_CHARS = 2000
VIEW_MAX_CHARS = 4000
IMAGE_MIMES = ("image/png", "image/jpeg", "image/svg+xml")


def compact_cells(cells: list[Cell], keep: int) -> list[Cell]:
    """The last ``keep`` cells whole, older ones folded into one summary cell."""
    if len(cells) <= keep:
        return list(cells)
    older = cells[:-keep]
    lines = [
        f"{f'#{cell.number} ' if cell.number else ''}[{cell.status}] "
        f"{cell.description or _first_line(cell.code)}"
        for cell in older
    ]
    summary = Cell(
        code=f"# {len(older)} earlier cells, compacted",
        stdout="\n".join(lines),
        description=f"summary of {len(older)} earlier cells",
        status="ok",
    )
    return [summary, *cells[-keep:]]


def in_queue_order(cells: list[Cell]) -> list[Cell]:
    """The cells by number, as they were queued (a pad records a cell when it ends, so a
    queued cell cancelled while another ran comes first); a cell without a number (a note of
    folded history) stays after the cell it followed."""
    last = 0
    keys = []
    for place, cell in enumerate(cells):
        last = cell.number or last
        keys.append((last, place))
    return [cell for _, cell in sorted(zip(keys, cells, strict=True), key=lambda pair: pair[0])]


def view(name: str, cells: list[Cell], keep: int) -> str:
    """Plain text of every cell with its output, older cells compacted (for an LLM)."""
    if not cells:
        return f"Pad '{name}' has no cells yet."
    parts = [f"Pad '{name}': {len(cells)} cells"]
    for cell in compact_cells(in_queue_order(cells), keep):
        parts.append(_view_cell(cell))
    return "\n\n".join(parts)


def _label(cell: Cell) -> str:
    """``[N] `` of a numbered cell; nothing for one that stands for others."""
    return f"[{cell.number}] " if cell.number else ""


def _view_cell(cell: Cell) -> str:
    what = f"{cell.description or 'cell'} ({cell.status}, {cell.duration_s:.2f}s)"
    title = f"--- {_label(cell)}{what}"
    lines = [title, _indent(cell.code, ">>> ", "... ")]
    for label, text in (("", cell.stdout), ("[stderr] ", cell.stderr), ("[logs] ", cell.logs)):
        if text:
            lines.append(label + _cut_chars(text.rstrip("\n"), VIEW_MAX_CHARS))
    if cell.result is not None:
        lines.append(f"Out: {_cut_chars(cell.result, VIEW_MAX_CHARS)}")
    if cell.error:
        lines.append(f"[error] {_cut_chars(cell.error.rstrip(), VIEW_MAX_CHARS)}")
    for output in cell.outputs:
        lines.append(f"[output] {describe_output(output)}")
    return "\n".join(lines)


def dump(name: str, cells: list[Cell]) -> str:
    """Notebook-style markdown of all cells: code, cut output, result, last error line, logs."""
    parts = [f"# Pad `{name}`"]
    if not cells:
        parts.append("_No cells yet._")
    for cell in in_queue_order(cells):
        heading = f"## {_label(cell)}{cell.description or 'Cell'}"
        meta = f"_status: {cell.status} · {cell.duration_s:.2f}s_"
        if cell.estimated_time:
            meta += f" _· estimated {cell.estimated_time}_"
        block = [heading, meta, f"```python\n{cell.code.rstrip()}\n```"]
        for label, text in (("Output", cell.stdout), ("Stderr", cell.stderr)):
            if text.strip():
                block.append(f"**{label}:**\n```\n{_cut_lines(text.rstrip())}\n```")
        if cell.result is not None:
            block.append(f"**Result:**\n```\n{_cut_lines(cell.result)}\n```")
        if cell.error:
            block.append(f"**Error:** `{error_headline(cell)}`")
        if cell.outputs:
            block.append("**Outputs:** " + "; ".join(describe_output(o) for o in cell.outputs))
        if cell.logs.strip():
            block.append(f"**Logs:**\n```\n{_cut_lines(cell.logs.rstrip())}\n```")
        parts.append("\n\n".join(block))
    return "\n\n".join(parts) + "\n"


def to_ipynb(name: str, cells: list[Cell]) -> dict[str, Any]:
    """An nbformat-4 notebook (as a dict) with outputs and images, validated by nbformat.

    Stable between two exports of one pad: each notebook cell's id is its pad cell's id
    (:func:`notebook_ids`), its ``execution_count`` the cell's number. A cell that raised is
    tagged ``raises-exception``, so ``nbconvert --execute`` and papermill run on past it as
    the pad did.
    """
    import nbformat
    from nbformat import v4

    notebook = v4.new_notebook(
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
            "scratchpad": {"pad": name},
        }
    )
    cells = in_queue_order(cells)
    for cell, cell_id in zip(cells, notebook_ids(cells), strict=True):
        if not cell.number and not cell.code.strip():  # a note standing for other cells
            note = f"_{cell.description}_: {cell.stdout.strip()}".strip()
            notebook.cells.append(v4.new_markdown_cell(source=note, id=cell_id))
            continue
        metadata: dict[str, Any] = {
            "scratchpad": {
                "id": cell.id,
                "number": cell.number,
                "status": cell.status,
                "description": cell.description,
                "duration_s": cell.duration_s,
            }
        }
        if cell.error:
            metadata["tags"] = ["raises-exception"]
        count = cell.number or None
        notebook.cells.append(
            v4.new_code_cell(
                source=cell.code,
                id=cell_id,
                execution_count=count,
                outputs=_nb_outputs(cell, count),
                metadata=metadata,
            )
        )
    nbformat.validate(notebook)
    return dict(notebook)


def notebook_ids(cells: list[Cell]) -> list[str]:
    """An nbformat cell id for each cell (1-64 of ``[A-Za-z0-9_-]``, unique in the notebook),
    derived from the cell's own id, so two exports of a pad agree: the id itself when it is
    one already, else a digest of it; a repeat gets ``-2``, ``-3``, ..."""
    taken: set[str] = set()
    ids = []
    for cell in cells:
        base = cell.id
        if not CELL_ID.fullmatch(base):
            base = hashlib.sha256(cell.id.encode("utf-8", "replace")).hexdigest()[:16]
        chosen, extra = base, 1
        while chosen in taken:
            extra += 1
            chosen = f"{base[: 60 - len(str(extra))]}-{extra}"
        taken.add(chosen)
        ids.append(chosen)
    return ids


def _nb_outputs(cell: Cell, count: int | None) -> list[Any]:
    from nbformat import v4

    outputs: list[Any] = [
        v4.new_output("display_data", data=made)
        if kind == "display"
        else v4.new_output("stream", name=kind, text=made)
        for kind, made in in_order(cell)
    ]
    if cell.result is not None:
        data = {**cell.result_data, "text/plain": cell.result}
        outputs.append(v4.new_output("execute_result", data=data, execution_count=count))
    if cell.error:
        ename, _, evalue = last_error_line(cell.error).partition(":")
        outputs.append(
            v4.new_output(
                "error",
                ename=ename.strip() or "Error",
                evalue=evalue.strip(),
                traceback=cell.error.rstrip("\n").splitlines(),
            )
        )
    return outputs


def describe_output(bundle: dict[str, Any]) -> str:
    for mime in IMAGE_MIMES:
        if mime in bundle:
            return f"{mime} ({len(str(bundle[mime]))} chars base64)"
    mimes = ", ".join(sorted(bundle))
    text = str(bundle.get("text/plain", ""))
    return f"{mimes}: {_cut_chars(text, 200)}" if text else mimes


def error_headline(cell: Cell) -> str:
    """The line that says what happened, as the web UI heads it: a stopped cell's (timeout,
    cancel, kill) first line says why it stopped; an error's is its exception's line."""
    error = (cell.error or "").strip()
    if cell.status != "error" and error:
        return error.splitlines()[0].strip()
    return last_error_line(error)


KERNEL_NOTE = "Note: "  # how the kernel's hints after a traceback begin (IPython lines, sandbox)


def last_error_line(error: str) -> str:
    """The exception's own line (``ZeroDivisionError: division by zero``), past the notes the
    kernel adds after a traceback."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    while len(lines) > 1 and lines[-1].startswith(KERNEL_NOTE):
        lines.pop()
    return lines[-1] if lines else ""


def _first_line(code: str) -> str:
    for line in code.splitlines():
        if line.strip():
            return _cut_chars(line.strip(), 80)
    return "(empty)"


def _indent(code: str, first: str, rest: str) -> str:
    lines = code.rstrip("\n").splitlines() or [""]
    return "\n".join((first if i == 0 else rest) + line for i, line in enumerate(lines))


def _cut_chars(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"


def _cut_lines(text: str) -> str:
    """At most DUMP_MAX_LINES lines and DUMP_MAX_CHARS characters, noting what was cut."""
    lines = text.splitlines()
    cut = ""
    if len(lines) > DUMP_MAX_LINES:
        cut = f"\n[... {len(lines) - DUMP_MAX_LINES} more lines ...]"
        text = "\n".join(lines[:DUMP_MAX_LINES])
    if len(text) > DUMP_MAX_CHARS:
        cut = f"\n[... {len(text) - DUMP_MAX_CHARS} more characters ...]" + cut
        text = text[:DUMP_MAX_CHARS]
    return text + cut
