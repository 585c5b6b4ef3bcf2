"""A process that writes observations forever, printing each id once its put has returned."""

import sys
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.observations import ObservationStore

path = Path(sys.argv[1])
label = sys.argv[2]
store = ObservationStore(path, settings=Settings(home=path.parent))
number = 0
while True:
    size = 200 if number % 3 else 200_000  # every third entry is chunked
    entry = store.put(f"{label} {number} " + "w" * size, turn_id=label, step_num=number)
    print(entry, number, flush=True)
    number += 1
