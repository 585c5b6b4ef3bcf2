"""A process that writes observations forever, printing each id once its put has returned.

Arguments: the store's path, a label; optionally a text every entry holds (a secret another
process scrubs), the size of every third entry (default 200 000: chunked), and a number of
puts after which the store is closed, expired entries collected and a new store opened (as
short-lived processes come and go; entries then live 2 s; default 0: one store forever).
"""

import sys
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.observations import ObservationStore

path = Path(sys.argv[1])
label = sys.argv[2]
extra = sys.argv[3] if len(sys.argv) > 3 else ""
big = int(sys.argv[4]) if len(sys.argv) > 4 else 200_000
reopen = int(sys.argv[5]) if len(sys.argv) > 5 else 0
settings = Settings(home=path.parent)
store = ObservationStore(path, settings=settings)
number = 0
while True:
    size = 200 if number % 3 else big
    text = f"{label} {number} {extra} " + "w" * size + f" {extra}"
    ttl = 2.0 if reopen else None
    entry = store.put(text, turn_id=label, step_num=number, ttl_seconds=ttl)
    print(entry, number, flush=True)
    number += 1
    if reopen and number % reopen == 0:
        store.gc()
        store.close()
        store = ObservationStore(path, settings=settings)
