"""A recorded cell keeps where each display came among its stdout and stderr (``outputs_at``),
true in the stored record, under the per-stream cap, the scrubber, a fitted copy and a
later re-scrub, so a page that reads it afterwards shows what the cell made in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.runtime.cell import Cell, fit_cell
from scratchpad.runtime.cell import in_order as cell_in_order
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.rescrub import scrub_cell
from scratchpad.scrub import Scrubber, register

SECRET = "order-s3cret-value-99"


def in_order(cell: Cell) -> list[str]:
    """The cell's stdout, stderr and displays, cut at its ``outputs_at``, in that order."""
    assert len(cell.outputs_at) == len(cell.outputs), cell.outputs_at
    return [
        f"{kind}: {made['text/plain'] if kind == 'display' else made}"
        for kind, made in cell_in_order(cell)
    ]


MIXED = """import sys
print('first é😀')
display('one')
print('warned', file=sys.stderr)
display('two')
print('last')"""


async def test_a_recorded_cell_knows_where_each_display_came(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("order")
    ran = await pad.execute(MIXED)
    [stored] = await manager.peek("order").load_cells()
    made = [
        "stdout: first é😀\n",
        "display: 'one'",
        "stderr: warned\n",
        "display: 'two'",
        "stdout: last\n",
    ]
    assert in_order(ran) == made
    assert in_order(stored) == made
    assert stored.outputs_at == [[len("first é😀\n"), 0], [len("first é😀\n"), 7]]
    notebook = manager.peek("order").to_ipynb()
    [code] = notebook["cells"]
    shown = [o.get("name") or o["data"]["text/plain"] for o in code["outputs"]]
    assert shown == ["stdout", "'one'", "stderr", "'two'", "stdout"]
    old = {k: v for k, v in stored.to_dict().items() if k != "outputs_at"}  # an older record
    assert Cell.from_dict(old).outputs_at == []
    assert [kind for kind, _ in cell_in_order(Cell.from_dict(old))] == [
        "stdout",
        "stderr",
        "display",
        "display",
    ]
    assert Cell.from_dict({**old, "outputs_at": [[1, 2, 3]]}).outputs_at == []


CAP = 4000
CAPPED = f"""import sys
print('{SECRET}')
display('in the head')
for i in range(400):
    print('middle line', i)
display('in the middle')
for i in range(400):
    print('late line', i)
print('{SECRET}')
display('in the tail')
print('after the tail display')
print('and an error line', file=sys.stderr)
display('last')"""


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", output_cap_bytes=CAP, kernel_start_timeout_s=20.0)


async def test_places_stay_true_under_the_cap_and_the_scrubber(
    manager: ScratchpadManager,
) -> None:
    register([(SECRET, "DS_ORDER__TOKEN")])
    pad = await manager.get_or_create("capped")
    await pad.execute(CAPPED)
    [cell] = await manager.peek("capped").load_cells()
    assert SECRET not in cell.stdout and "bytes of output dropped" in cell.stdout
    head, middle, tail, last = (cell.stdout[: at[0]] for at in cell.outputs_at)
    assert head == "[DS_ORDER__TOKEN]\n"  # a secret before it: the place moved with its label
    assert middle.endswith("(kept the first and last part) ...]\n")  # just after the note
    assert tail.endswith("late line 399\n[DS_ORDER__TOKEN]\n")
    assert cell.stdout[len(tail) :] == "after the tail display\n"
    assert last == cell.stdout
    assert [at[1] for at in cell.outputs_at] == [0, 0, 0, len(cell.stderr)]
    assert in_order(cell)[-3:] == [
        "stdout: after the tail display\n",
        "stderr: and an error line\n",
        "display: 'last'",
    ]


def test_a_fitted_cell_and_a_rescrub_move_the_places() -> None:
    stdout = "a" * 1000 + "B" * 1000 + SECRET + "\n" + "c" * 1000
    places = [[100, 0], [1500, 0], [len(stdout) - 200, 3], [len(stdout), 3]]
    cell = Cell(code="x", stdout=stdout, stderr="err", outputs=[{}] * 4, outputs_at=places)
    fitted = fit_cell(cell.to_dict(), 1500, "to fit")
    text, (first, cut, late, end) = fitted["stdout"], fitted["outputs_at"]
    assert len(text) < 1500 and (first, end) == ([100, 0], [len(text), 3])
    assert text[: cut[0]].endswith("characters cut to fit ...]\n") and late[1] == 3
    assert text[late[0] :] == "c" * 200
    scrub = Scrubber()
    scrub.add(SECRET, "DS_ORDER__TOKEN")
    assert scrub_cell(scrub, cell)
    assert SECRET not in cell.stdout and cell.outputs_at[:2] == places[:2]
    assert cell.stdout[cell.outputs_at[2][0] :] == "c" * 200
    assert cell.outputs_at[3] == [len(cell.stdout), 3]
