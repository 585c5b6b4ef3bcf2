"""How long a cell may run: from the caller's hard ``timeout_s``, else from its estimate; and
the checks of both, shared by every entry point (Python, CLI, HTTP, MCP)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeGuard

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError

# What a caller passes to set a cell's time, as the Python API and the HTTP protocol name it.
# The advice a stopped cell gets names these; an edge that calls them otherwise (the CLI's
# --timeout) rewords that advice with name_parameters(), so the reader is told its own words.
PARAMETERS: Mapping[str, str] = {"timeout": "timeout_s", "estimate": "estimated_seconds"}
AdviceKind = Literal["hard", "total", "inactivity"]
_ADVICE: dict[AdviceKind, str] = {
    "hard": "That was its {timeout}: pass a larger one if it needs longer; progress() shows "
    "how far it got.",
    "total": "If it needs longer, pass {timeout}, or a realistic {estimate} (the limit becomes "
    "about twice the estimate); progress() shows how far it got.",
    "inactivity": "Split such work into smaller steps; the window grows with {estimate}, up to "
    "SCRATCHPAD_MAX_INACTIVITY_S, whatever {timeout} says.",
}


def advice(kind: AdviceKind, names: Mapping[str, str] = PARAMETERS) -> str:
    """What a cell stopped for ``kind`` should do next time, naming the caller's ``names``."""
    return _ADVICE[kind].format_map(names)


def name_parameters(text: str, names: Mapping[str, str]) -> str:
    """``text`` (a stopped cell's error) with this module's advice naming ``names`` (keys
    ``timeout`` and ``estimate``) instead of :data:`PARAMETERS`; the rest of the text (the
    cell's own traceback) is left exactly as it was."""
    for kind in _ADVICE:
        text = text.replace(advice(kind), advice(kind, names))
    return text


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


def check_timeout(
    timeout_s: object, settings: Settings | None = None, *, name: str = "timeout_s"
) -> float:
    """A caller's hard timeout as a float, or InvalidInputError saying what is allowed: a
    finite number of seconds > 0, at most ``max_timeout_s`` of ``settings`` when given (a
    remote client leaves the limit to its server)."""
    limit = settings.max_timeout_s if settings is not None else math.inf
    if not is_seconds(timeout_s) or not 0 < timeout_s <= limit:
        most = f" and at most {limit:g} (SCRATCHPAD_MAX_TIMEOUT_S)" if settings else ""
        raise InvalidInputError(f"{name} must be a number of seconds > 0{most}, not {timeout_s!r}")
    return float(timeout_s)


def check_estimate(estimate: object, *, name: str = "estimated_seconds") -> float:
    """A caller's estimate as a float (0: none), or InvalidInputError saying what to pass."""
    if not is_seconds(estimate) or estimate < 0:
        raise InvalidInputError(
            f"{name} must be a number of seconds >= 0 (0: no estimate), not {estimate!r}"
        )
    return float(estimate)


def is_seconds(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is a finite number (not a bool, NaN or an infinity)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
