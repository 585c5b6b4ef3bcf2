"""A pad's resource request: what it asks a cluster for (``cpus``, ``gpus``, ``memory_mb``,
``custom``), checked the same way whichever door it came through (Python, HTTP, MCP, CLI), and
what it means for the pad's actor (Ray options) and its kernel (limits). No Ray needed here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scratchpad.errors import InvalidInputError


@dataclass(frozen=True, slots=True)
class PadResources:
    """What a pad asks Ray for: its actor is placed on a node that has it."""

    num_cpus: float = 0.0
    num_gpus: float = 0.0
    memory_mb: int = 0
    custom: Mapping[str, float] = field(default_factory=dict)

    def options(self) -> dict[str, Any]:
        """The actor options that ask for these resources."""
        options: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        if self.memory_mb:
            options["memory"] = self.memory_mb * 1024 * 1024
        if self.custom:
            options["resources"] = dict(self.custom)
        return options

    def limits(self) -> dict[str, object]:
        """The kernel limits that match what was asked: its memory, and its CPU share."""
        limits: dict[str, object] = {}
        if self.memory_mb:
            limits["memory_mb"] = self.memory_mb
        if self.num_cpus:
            limits["cpu_weight"] = max(1, min(10000, round(100 * self.num_cpus)))
        return limits

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpus": self.num_cpus, "gpus": self.num_gpus, "memory_mb": self.memory_mb,
            "custom": dict(self.custom),
        }  # fmt: skip


RESOURCE_KEYS = ("cpus", "gpus", "memory_mb", "custom")


def check_resources(asked: object, defaults: PadResources) -> PadResources:
    """A pad's resource request (``cpus``, ``gpus``, ``memory_mb``, ``custom``: name →
    amount) over ``defaults``; InvalidInputError saying what is wrong."""
    if not isinstance(asked, Mapping):
        raise InvalidInputError(
            "resources must be an object such as {'cpus': 1, 'memory_mb': 2048, "
            "'custom': {'gpu_node': 1}}"
        )
    unknown = sorted(str(key) for key in asked if key not in RESOURCE_KEYS)
    if unknown:
        raise InvalidInputError(
            f"unknown resource(s) {', '.join(map(repr, unknown))}: use "
            f"{', '.join(RESOURCE_KEYS)} (custom: an object of Ray resource names to amounts)"
        )
    cpus = _amount(asked.get("cpus", defaults.num_cpus), "cpus")
    gpus = _amount(asked.get("gpus", defaults.num_gpus), "gpus")
    memory = _amount(asked.get("memory_mb", defaults.memory_mb), "memory_mb")
    custom_asked = asked.get("custom", defaults.custom)
    if not isinstance(custom_asked, Mapping):
        raise InvalidInputError("resources.custom must be an object of resource names to amounts")
    if gpus > 1 and not gpus.is_integer():
        raise InvalidInputError(f"gpus above 1 must be a whole number, not {gpus:g}")
    if not memory.is_integer():
        raise InvalidInputError(f"memory_mb must be a whole number of MiB, not {memory:g}")
    custom = {}
    for key, value in custom_asked.items():
        if not isinstance(key, str) or not key or len(key) > 100 or not key.isprintable():
            raise InvalidInputError(f"resource name {str(key)[:100]!r} is not allowed")
        if key in RAY_OWN_RESOURCES:
            raise InvalidInputError(
                f"{key!r} is one of Ray's own resources, not a custom one: {RAY_OWN_RESOURCES[key]}"
            )
        custom[key] = _amount(value, f"custom resource {key!r}")
    return PadResources(cpus, gpus, int(memory), custom)


# Ray's own resources, which its actor options refuse among the custom ones
RAY_OWN_RESOURCES = {
    "CPU": "ask for it with 'cpus'", "GPU": "ask for it with 'gpus'",
    "memory": "ask for it with 'memory_mb'", "object_store_memory": "a pad does not ask for it",
}  # fmt: skip
RAY_UNIT = 1e-4  # the finest fraction of a resource Ray takes


def _amount(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise InvalidInputError(f"{what} must be a number >= 0, not {str(value)[:40]!r}")
    if value > 1e9:
        raise InvalidInputError(f"{what} is too large ({value:g})")
    if 0 < value < RAY_UNIT:
        raise InvalidInputError(f"{what} must be 0 or at least {RAY_UNIT:g}, not {value:g}")
    return float(value)


def checked_resources(resources: object) -> None:
    """InvalidInputError for a malformed resource request, whatever backend would place it."""
    check_resources(resources, PadResources())
