"""A process that scrubs a store again and again, as a server does after vault changes.

It keeps a store of its own open the whole time (a server's, an MCP process's), learns
``SECRET`` and re-scrubs the home with ``rescrub_home`` (a store opened for that) in a loop,
reading through its own store between passes. Each pass prints ``pass N CHANGED FAILED``
(entries rewritten, stores or files that could not be); a failure prints its traceback and
exits 1.
"""

import sys
import traceback
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.observations import ObservationStore
from scratchpad.runtime.rescrub import rescrub_home
from scratchpad.scrub import register

path, secret, passes = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
settings = Settings(home=path.parent)
register([(secret, "DS_STRESS__TOKEN")])
try:
    with ObservationStore(path, settings=settings) as own:
        for number in range(passes):
            report = rescrub_home(settings)
            for info in own.list_all()[-5:]:  # the process's own connection at work
                own.read(info.id, "head")
            print("pass", number, report.entries_changed, len(report.failed), flush=True)
except Exception:
    traceback.print_exc()
    sys.exit(1)
