"""Time for the agent: one clock seam, and the two ways a moment is written down.

Cycle ids (and ``prerestore_``/``prereset_`` names) use the UTC time ``YYYYMMDD_HHMMSS``,
so they sort in the order the cycles ran even when the local clock goes back (the end of
summer time). ``last_updated``, the log lines and the outcome records keep the local time
with its offset, which is what a person reading them wants.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

Clock = Callable[[], dt.datetime]
STAMP_FORMAT = "%Y%m%d_%H%M%S"


def local_now() -> dt.datetime:
    """Now, in local time with its offset (the default clock)."""
    return dt.datetime.now().astimezone()


def iso(moment: dt.datetime, timespec: str = "seconds") -> str:
    """``2025-03-04T05:06:07+01:00``."""
    return moment.isoformat(timespec=timespec)


def utc_stamp(moment: dt.datetime) -> str:
    """``YYYYMMDD_HHMMSS`` of ``moment`` in UTC (a naive moment is taken as local time)."""
    return moment.astimezone(dt.UTC).strftime(STAMP_FORMAT)
