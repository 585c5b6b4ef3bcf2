"""A pad's resource request, checked once for every edge (placement.check_resources): what a
good one becomes, and what each bad one is told. Pure functions: no Ray cluster."""

from __future__ import annotations

import subprocess
import sys

import pytest

from scratchpad.errors import InvalidInputError
from scratchpad.events import RESOURCES_SCHEMA
from scratchpad.runtime.placement import RESOURCE_KEYS, PadResources, check_resources

DEFAULTS = PadResources(num_cpus=1.0, num_gpus=0.0, memory_mb=512, custom={"pool": 1.0})


def test_a_request_overrides_the_defaults_it_names_and_keeps_the_others() -> None:
    asked = check_resources({"cpus": 2, "custom": {"gpu_node": 0.5}}, DEFAULTS)
    assert asked == PadResources(2.0, 0.0, 512, {"gpu_node": 0.5})
    assert check_resources({}, DEFAULTS) == DEFAULTS
    whole = check_resources({"cpus": 0.5, "gpus": 1, "memory_mb": 2048.0}, PadResources())
    assert whole.to_dict() == {"cpus": 0.5, "gpus": 1.0, "memory_mb": 2048, "custom": {}}


def test_what_a_request_asks_of_ray_and_of_the_kernel_match() -> None:
    asked = check_resources({"cpus": 2, "memory_mb": 1024, "custom": {"big": 1}}, PadResources())
    assert asked.options() == {
        "num_cpus": 2.0, "num_gpus": 0.0, "memory": 1024 * 1024 * 1024, "resources": {"big": 1.0},
    }  # fmt: skip
    assert asked.limits() == {"memory_mb": 1024, "cpu_weight": 200}


@pytest.mark.parametrize(
    ("asked", "words"),
    [
        ("lots", "resources must be an object such as {'cpus': 1"),
        ([1, 2], "resources must be an object"),
        ({"cpu": 1, "ram": 2}, "unknown resource(s) 'cpu', 'ram': use cpus, gpus, memory_mb"),
        ({"cpus": -1}, "cpus must be a number >= 0, not '-1'"),
        ({"gpus": float("nan")}, "gpus must be a number >= 0"),
        ({"memory_mb": "2048"}, "memory_mb must be a number >= 0, not '2048'"),
        ({"cpus": True}, "cpus must be a number >= 0, not 'True'"),
        ({"cpus": 1e12}, "cpus is too large"),
        ({"custom": 3}, "resources.custom must be an object of resource names to amounts"),
        ({"custom": {"gpu_node": -2}}, "custom resource 'gpu_node' must be a number >= 0"),
        ({"custom": {"": 1}}, "resource name '' is not allowed"),
        ({"custom": {"a\nb": 1}}, "resource name 'a\\nb' is not allowed"),
        # what Ray's actor options would refuse at the start (an internal error), said here
        ({"custom": {"CPU": 1}}, "'CPU' is one of Ray's own resources, not a custom one: ask"),
        ({"custom": {"GPU": 1}}, "'GPU' is one of Ray's own resources"),
        ({"custom": {"memory": 1}}, "ask for it with 'memory_mb'"),
        ({"custom": {"object_store_memory": 1}}, "'object_store_memory' is one of Ray's own"),
        ({"cpus": 0.00001}, "cpus must be 0 or at least 0.0001, not 1e-05"),
        ({"custom": {"pool": 1e-6}}, "custom resource 'pool' must be 0 or at least 0.0001"),
        ({"gpus": 1.5}, "gpus above 1 must be a whole number, not 1.5"),
        ({"memory_mb": 0.5}, "memory_mb must be a whole number of MiB, not 0.5"),
    ],
)
def test_a_bad_request_says_what_is_wrong(asked: object, words: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        check_resources(asked, DEFAULTS)
    assert words in str(refused.value)


def test_the_documented_shape_names_the_keys_the_check_takes() -> None:
    """The schema HTTP and MCP document (events.py) and the check agree on the keys."""
    assert tuple(RESOURCES_SCHEMA["properties"]) == RESOURCE_KEYS


def test_checking_a_request_needs_no_ray() -> None:
    """Every edge checks requests, also where Ray is not installed."""
    code = (
        "import sys; import scratchpad.runtime.placement as r; "
        "r.check_resources({'cpus': 1}, r.PadResources()); print('ray' in sys.modules)"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "False"
