"""How long a cell may run, derived from the caller's estimate."""

from __future__ import annotations

from dataclasses import dataclass

from scratchpad.config import Settings


@dataclass(frozen=True, slots=True)
class Timeouts:
    """``total``: wall-clock budget of a cell; ``inactivity``: longest silence allowed."""

    total: float
    inactivity: float


def compute_timeouts(estimated_seconds: float | None, settings: Settings) -> Timeouts:
    """total = max(2e, e + slack) for e > 0, else the default; inactivity = max(e/2, min).

    Both are capped by settings (total by ``max_timeout_s``, inactivity by
    ``max_inactivity_s``), and inactivity never exceeds total.
    """
    estimate = float(estimated_seconds or 0.0)
    if estimate > 0:
        total = max(2 * estimate, estimate + settings.timeout_slack_s)
    else:
        total = settings.default_timeout_s
    total = min(total, settings.max_timeout_s)
    inactivity = min(max(0.5 * estimate, settings.min_inactivity_s), settings.max_inactivity_s)
    return Timeouts(total=total, inactivity=min(inactivity, total))
