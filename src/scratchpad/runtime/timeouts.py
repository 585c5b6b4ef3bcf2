"""How long a cell may run: from the caller's hard ``timeout_s``, else from its estimate."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError


@dataclass(frozen=True, slots=True)
class Timeouts:
    """``total``: wall-clock budget of a cell; ``inactivity``: longest time without any sign
    of life (output, progress, a heartbeat) before the cell counts as hung."""

    total: float
    inactivity: float
    hard: bool = False  # total is the caller's own timeout_s


def compute_timeouts(
    estimated_seconds: float | None, settings: Settings, timeout_s: float | None = None
) -> Timeouts:
    """total = ``timeout_s`` when given, else max(2e, e + slack) for an estimate e > 0, else
    the default; inactivity = max(e/2, min).

    total is capped by ``max_timeout_s``, inactivity by ``max_inactivity_s``, and inactivity
    never exceeds total.
    """
    estimate = float(estimated_seconds or 0.0)
    if timeout_s is not None:
        total = check_timeout(timeout_s, settings)
    elif estimate > 0:
        total = min(max(2 * estimate, estimate + settings.timeout_slack_s), settings.max_timeout_s)
    else:
        total = min(settings.default_timeout_s, settings.max_timeout_s)
    inactivity = min(max(0.5 * estimate, settings.min_inactivity_s), settings.max_inactivity_s)
    return Timeouts(total=total, inactivity=min(inactivity, total), hard=timeout_s is not None)


def check_timeout(timeout_s: object, settings: Settings) -> float:
    """A caller's hard timeout as a float, or InvalidInputError saying what is allowed."""
    limit = settings.max_timeout_s
    if (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, (int, float))
        or not math.isfinite(timeout_s)
        or not 0 < timeout_s <= limit
    ):
        raise InvalidInputError(
            f"timeout_s must be a number of seconds > 0 and at most {limit:g} "
            f"(SCRATCHPAD_MAX_TIMEOUT_S), not {timeout_s!r}"
        )
    return float(timeout_s)
