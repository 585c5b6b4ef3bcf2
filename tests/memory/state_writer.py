"""A process that writes an agent's active.yaml forever, for the kill tests.

``save ROOT``: save_state in a loop. ``cycle ROOT``: whole cycles. Each write is of state
number n (``counter: n``, notes built from n); n is printed once the write has returned.
It starts from the counter found in active.yaml, plus one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scratchpad.memory.layout import AgentPaths
from scratchpad.memory.state import default_state, load_state, save_state

NOTE_LINES = 20_000


def notes_for(number: int) -> str:
    return "".join(f"state {number} line {line}\n" for line in range(NOTE_LINES))


class CountingModel:
    """Sets the next counter and its notes, then says done: one cycle per state."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.calls = 0

    async def complete(self, *, system: str, user: str) -> str:
        self.calls += 1
        if self.calls % 2:
            args = {"counter": self.number, "notes": notes_for(self.number)}
            return json.dumps({"tool": "update_scratchpad", "args": args})
        return json.dumps({"tool": "done", "args": {"summary": str(self.number)}})


def save_forever(paths: AgentPaths, number: int) -> None:
    while True:
        state = default_state()
        state.update(counter=number, notes=notes_for(number))
        save_state(paths.active, state)
        print(number, flush=True)
        number += 1


def cycle_forever(paths: AgentPaths, number: int) -> None:
    from scratchpad.memory import AgentConfig, CycleAgent, ToolsConfig

    config = AgentConfig(notes_cap_chars=10**9, tools=ToolsConfig(pads=False))
    model = CountingModel(number)
    agent = CycleAgent(paths.root, model, config=config, rules="count")
    while True:
        agent.run_once()
        print(model.number, flush=True)
        model.number += 1


def main() -> None:
    mode, paths = sys.argv[1], AgentPaths.of(Path(sys.argv[2]))
    number = int(load_state(paths.active).get("counter", 0)) + 1
    (save_forever if mode == "save" else cycle_forever)(paths, number)


if __name__ == "__main__":
    main()
