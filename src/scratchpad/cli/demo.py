"""``scratchpad demo``: a short tour of a pad (state kept, progress, an error, a plot)."""

from __future__ import annotations

import importlib.util

from rich.rule import Rule

from scratchpad.cli.output import LiveCell, console, print_text
from scratchpad.runtime.manager import ScratchpadManager

STEPS = [
    ("define state", "numbers = [3, 1, 4, 1, 5, 9, 2, 6]\nprint('defined', len(numbers))"),
    ("state is kept", "sorted(numbers)"),
    ("report progress", "for step in range(3):\n    progress(f'step {step}')\nsum(numbers)"),
    ("an error is data", "numbers[100]"),
    ("the pad survived", "max(numbers)"),
]
PLOT = (
    "import matplotlib.pyplot as plt\n"
    "plt.plot(numbers, marker='o')\n"
    "plt.title('numbers')\n"
    "plt.show()"
)


async def run_demo(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("demo")
    await pad.reset()
    steps = list(STEPS)
    if importlib.util.find_spec("matplotlib") is not None:
        steps.append(("a plot", PLOT))
    for description, code in steps:
        console.print(Rule(description))
        console.print(code, markup=False, style="bold")
        live = LiveCell()
        cell = await pad.execute(code, description=description, on_event=live.event)
        live.end(cell)
    console.print(Rule("pad.dump()"))
    print_text(pad.dump())
    console.print("pad 'demo' stays on the pad server: try `scratchpad view demo`", markup=False)
