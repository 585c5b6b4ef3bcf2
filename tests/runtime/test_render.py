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
    cells = [Cell(code=f"step_{i}()", description=f"step {i}", number=i + 1) for i in range(8)]
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


def numbered(first: int, count: int) -> list[Cell]:
    """Cells numbered from ``first`` (a pad whose older cells were folded or compacted)."""
    return [
        Cell(code=f"x = {n}", description=f"step {n}", number=n, id=f"c{n}")
        for n in range(first, first + count)
    ]


def test_view_and_dump_show_each_cell_by_its_own_number() -> None:
    cells = numbered(31, 10)
    text = render.view("p", cells, keep=5)
    assert "--- [36] step 36" in text and "--- [40] step 40" in text
    assert "[0]" not in text and "--- [1] " not in text
    assert "#31 [ok] step 31" in text  # the compacted ones too
    dump = render.dump("p", cells)
    assert "## [31] step 31" in dump and "## [40] step 40" in dump and "## [1]" not in dump


def test_cells_are_shown_in_the_order_they_were_queued_not_the_order_they_ended() -> None:
    """Cell 2 was cancelled while queued behind cell 1, so it was recorded first."""
    fold = Cell(code="", description="folded history", number=0)
    cells = [fold, *(Cell(code=str(n), description=f"step {n}", number=n) for n in (1, 3, 2, 4))]
    text = render.view("p", cells, keep=10)
    assert [text.index(f"[{n}] step {n}") for n in (1, 2, 3, 4)] == sorted(
        text.index(f"[{n}] step {n}") for n in (1, 2, 3, 4)
    )
    dump = render.dump("p", cells)
    assert dump.index("## [2] ") < dump.index("## [3] ")
    counts = [cell["execution_count"] for cell in render.to_ipynb("p", cells)["cells"][1:]]
    assert counts == [1, 2, 3, 4]
    assert render.in_queue_order([*cells[1:], fold])[-1] is fold  # a note stays where it was


def test_notebook_counts_are_the_cells_numbers_and_its_ids_the_cells_ids() -> None:
    cells = numbered(7, 3)
    notebook = render.to_ipynb("p", cells)
    assert [cell["execution_count"] for cell in notebook["cells"]] == [7, 8, 9]
    assert [cell["id"] for cell in notebook["cells"]] == ["c7", "c8", "c9"]
    assert render.to_ipynb("p", cells) == notebook  # a second export is the same


def test_notebook_ids_are_valid_and_unique_whatever_the_cell_ids() -> None:
    cells = [Cell(code="1", id=ident, number=n) for n, ident in enumerate(["a b/é", "x", "x"], 1)]
    notebook = render.to_ipynb("p", cells)
    nbformat.validate(nbformat.from_dict(notebook))
    ids = [cell["id"] for cell in notebook["cells"]]
    assert len(set(ids)) == 3 and ids[1] == "x"
    assert render.notebook_ids(cells) == ids


def test_notebook_tags_cells_that_raised_so_a_rerun_goes_on_past_them() -> None:
    notebook = render.to_ipynb("p", sample_cells())
    tags = [cell["metadata"].get("tags", []) for cell in notebook["cells"]]
    assert tags == [[], ["raises-exception"], []]


def test_notebook_result_carries_the_rich_forms_of_the_result() -> None:
    html = "<table><tr><td>1</td></tr></table>"
    cell = Cell(code="df", result="   a\n0  1", result_data={"text/html": html}, number=1)
    notebook = render.to_ipynb("p", [cell])
    (result,) = notebook["cells"][0]["outputs"]
    assert result["output_type"] == "execute_result" and result["execution_count"] == 1
    assert result["data"] == {"text/html": html, "text/plain": "   a\n0  1"}


def test_a_fold_note_is_a_markdown_cell_without_a_number() -> None:
    note = Cell(code="", description="history folded", stdout="30 earlier cell(s) were folded\n")
    notebook = render.to_ipynb("p", [note, *numbered(31, 1)])
    nbformat.validate(nbformat.from_dict(notebook))
    assert notebook["cells"][0]["cell_type"] == "markdown"
    assert "30 earlier cell(s)" in notebook["cells"][0]["source"]
    assert notebook["cells"][1]["execution_count"] == 31
    assert "--- history folded" in render.view("p", [note], keep=5)


def test_an_error_is_named_by_its_exception_not_by_the_note_after_it() -> None:
    from scratchpad.runtime.inkernel import sandbox, worker

    try:
        compile("!ls", "<cell 4>", "exec")
    except SyntaxError as exc:
        parsed = exc
    syntax = '  File "<cell 4>", line 1\n    !ls\n    ^\nSyntaxError: invalid syntax\n'
    refused = TRACEBACK.replace("ZeroDivisionError: division by zero", "PermissionError: x")
    cells = [
        Cell(code="!ls", status="error", error=syntax + worker.ipython_note(parsed)),
        Cell(code="open('/x', 'w')", status="error", error=refused + sandbox.NOTE),
    ]
    assert worker.ipython_note(parsed)  # the note the kernel adds
    dump = render.dump("p", cells)
    assert "**Error:** `SyntaxError: invalid syntax`" in dump
    assert "**Error:** `PermissionError: x`" in dump
    notebook = render.to_ipynb("p", cells)
    errors = [cell["outputs"][-1] for cell in notebook["cells"]]
    assert [(out["ename"], out["evalue"]) for out in errors] == [
        ("SyntaxError", "invalid syntax"),
        ("PermissionError", "x"),
    ]
    assert "Note: " in errors[0]["traceback"][-1]  # the hint stays in the traceback


def test_dump_heads_a_stopped_cell_with_why_it_stopped() -> None:
    stopped = "Cell timed out after 2s (interrupted; variables are kept).\n" + TRACEBACK.replace(
        "ZeroDivisionError: division by zero", "KeyboardInterrupt"
    )
    cells = [Cell(code="sleep()", status="timeout", error=stopped), *sample_cells()[1:2]]
    dump = render.dump("p", cells)
    assert "**Error:** `Cell timed out after 2s (interrupted; variables are kept).`" in dump
    assert "**Error:** `ZeroDivisionError: division by zero`" in dump  # an error: its exception
