"""Where a pad started by ``exec`` is placed: ``--cpus``, ``--gpus``, ``--memory`` and
``--resource NAME=AMOUNT`` become the ``resources`` of its server's start (a server run with
SCRATCHPAD_BACKEND=ray places the pad by them; another refuses them, saying so)."""

from __future__ import annotations

import math
from typing import Annotated

import typer

from scratchpad.cli.commands import not_negative

PLACEMENT = "Placement on a Ray cluster"


def _amount(value: float | None) -> float | None:
    """An amount's callback: 0 or more (an unset one stays unset)."""
    return value if value is None else not_negative(value)


def _checked(items: list[str] | None) -> list[str] | None:
    """``--resource``'s callback: each item NAME=AMOUNT, else a usage error before anything
    starts."""
    for item in items or []:
        _custom(item)
    return items or None


def _custom(item: str) -> tuple[str, float]:
    name, equals, amount = item.partition("=")
    try:
        value = float(amount)
    except ValueError:
        value = math.nan
    if not equals or not name.strip() or not math.isfinite(value):
        raise typer.BadParameter(
            f"{item!r} is not NAME=AMOUNT (e.g. gpu_node=1)", param_hint="'--resource'"
        )
    return name.strip(), value


CpusOpt = Annotated[
    float | None,
    typer.Option(
        "--cpus", metavar="N", callback=_amount,
        rich_help_panel=PLACEMENT, show_default=False,
        help="CPUs the pad asks its Ray cluster for (a server run with SCRATCHPAD_BACKEND=ray).",
    ),
]  # fmt: skip
GpusOpt = Annotated[
    float | None,
    typer.Option(
        "--gpus", metavar="N", callback=_amount,
        rich_help_panel=PLACEMENT, show_default=False,
        help="GPUs the pad asks for: it runs on a node that has them.",
    ),
]  # fmt: skip
MemoryOpt = Annotated[
    int | None,
    typer.Option(
        "--memory", metavar="MB", callback=_amount,
        rich_help_panel=PLACEMENT, show_default=False,
        help="Memory in MiB the pad asks for (and its memory limit).",
    ),
]  # fmt: skip
ResourceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--resource", metavar="NAME=AMOUNT", rich_help_panel=PLACEMENT, show_default=False,
        callback=_checked,
        help="A custom Ray resource the pad asks for, e.g. gpu_node=1 (repeatable).",
    ),
]  # fmt: skip


def asked_resources(
    cpus: float | None, gpus: float | None, memory: int | None, custom: list[str] | None
) -> dict[str, object] | None:
    """The ``resources`` of a start from the options given (None when none was); the server
    checks the amounts, so every edge says the same of a bad one."""
    asked: dict[str, object] = {}
    for key, value in (("cpus", cpus), ("gpus", gpus), ("memory_mb", memory)):
        if value is not None:
            asked[key] = value
    if custom:
        asked["custom"] = dict(_custom(item) for item in custom)
    return asked or None
