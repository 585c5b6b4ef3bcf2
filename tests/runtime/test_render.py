"""Rendering shared by every backend: view, dump, notebook, compaction."""

from __future__ import annotations

import nbformat

from scratchpad.runtime import render
from scratchpad.runtime.cell import Cell

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5E"
    "rkJggg=="
)
TRACEBACK = "Traceback (most recent call last):\n  File x\nZeroDivisionError: division by zero\n"


def sample_cells() -> list[Cell]:
    return [
        Cell(code="print('a')", stdout="a\n", description="print", duration_s=0.01),
        Cell(
            code="1/0",
            status="error",
            description="boom",
            error=TRACEBACK,
        ),
        Cell(code="plot()", outputs=[{"image/png": PNG, "text/plain": "<Figure>"}], result="3"),
    ]


def test_dump_cuts_long_output_to_twenty_lines() -> None:
    long_output = "".join(f"line {i}\n" for i in range(100))
    text = render.dump("p", [Cell(code="x", stdout=long_output, logs="progress 1")])
    assert "line 19" in text and "line 20\n" not in text
    assert "[... 80 more lines ...]" in text
    assert "**Logs:**" in text and "progress 1" in text


def test_dump_cuts_long_lines_to_2000_characters() -> None:
    text = render.dump("p", [Cell(code="x", stdout="z" * 5000)])
    assert "z" * 2000 in text and "z" * 2001 not in text
    assert "[... 3000 more characters ...]" in text


def test_dump_shows_the_last_traceback_line() -> None:
    text = render.dump("p", sample_cells())
    assert "**Error:** `ZeroDivisionError: division by zero`" in text
    assert "File x" not in text


def test_notebook_is_valid_and_carries_outputs() -> None:
    notebook = render.to_ipynb("p", sample_cells())
    nbformat.validate(nbformat.from_dict(notebook))
    first, second, third = notebook["cells"]
    assert first["outputs"][0] == {"output_type": "stream", "name": "stdout", "text": "a\n"}
    assert second["outputs"][0]["output_type"] == "error"
    assert second["outputs"][0]["ename"] == "ZeroDivisionError"
    kinds = [output["output_type"] for output in third["outputs"]]
    assert kinds == ["display_data", "execute_result"]
    assert third["outputs"][0]["data"]["image/png"] == PNG


def test_compaction_keeps_the_last_five() -> None:
    cells = [Cell(code=f"step_{i}()", description=f"step {i}") for i in range(8)]
    compacted = render.compact_cells(cells, keep=5)
    assert len(compacted) == 6
    assert compacted[1:] == cells[3:]
    summary = compacted[0]
    assert "3 earlier cells" in summary.code
    assert summary.stdout.splitlines() == ["#1 [ok] step 0", "#2 [ok] step 1", "#3 [ok] step 2"]
    assert render.compact_cells(cells[:5], keep=5) == cells[:5]


def test_view_uses_compaction_and_describes_images() -> None:
    cells = sample_cells() * 3
    text = render.view("p", cells, keep=5)
    assert text.startswith("Pad 'p': 9 cells")
    assert "summary of 4 earlier cells" in text
    assert "[output] image/png" in text
    assert render.view("p", [], keep=5) == "Pad 'p' has no cells yet."
