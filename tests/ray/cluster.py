"""A real multi-node Ray cluster on loopback for the Ray backend's tests.

Ray is imported lazily, so that without it the tests skip (each module starts with
``ray = pytest.importorskip("ray", reason=RAY_MISSING)``) instead of failing to collect.

One cluster for the tests of ``tests/ray`` (per xdist worker; gone once they ran, so it takes
nothing from the rest of the suite): a head and two worker nodes, each told apart by
a custom resource so a test can pin an actor to a node and see where it ran. Everything listens
on 127.0.0.1; the dashboard is off and object stores are small, so three nodes fit a laptop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

# Set when the test session starts, before any module imports Ray (children, such as second
# drivers, inherit them): without the first, a driver rewrites a 127.0.0.1 address to the
# host's outward IP (Ray's "remotely reachable" rule) and never reaches a GCS that listens on
# loopback only; the others make a cluster that asks for a token, as Scratchpad requires.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.setdefault("RAY_AUTH_MODE", "token")
os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))

RAY_MISSING = "the Ray backend's tests need Ray: pip install 'scratchpad[ray]'"
LOOPBACK = "127.0.0.1"
NAMESPACE = "scratchpad"
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's floor is 75 MiB
# A removed node is declared dead after ~5 s instead of ~16 s (Ray's default health check), so
# the actors it held fail (or move) that much sooner in node-loss tests.
FAST_HEALTH_CHECK = {
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 500,
    "health_check_failure_threshold": 3,
}


def node_args(**resources: float) -> dict[str, Any]:
    """One small node on loopback: one CPU, a small object store, the given custom resources."""
    return {
        "num_cpus": 1,
        "resources": resources,
        "node_ip_address": LOOPBACK,
        "object_store_memory": OBJECT_STORE_BYTES,
    }


@dataclass
class RayCluster:
    """The running cluster, as tests see it.

    ``node_a`` carries {"node_a": 100, "pad_node": 100}, ``node_b`` {"node_b": 100,
    "pad_node": 100}, the head {"head": 1}: pin with e.g. ``resources={"node_a": 0.01}``, or
    ``{"pad_node": 0.01}`` to let Ray choose a worker (and move an actor when its node goes).
    """

    cluster: Any  # ray.cluster_utils.Cluster
    node_a: Any
    node_b: Any
    extra_nodes: list[Any] = field(default_factory=list)

    @property
    def address(self) -> str:
        """The GCS address a driver passes to ``ray.init(address=...)``: 127.0.0.1:PORT."""
        return str(self.cluster.address)

    def add_worker(self, **resources: float) -> Any:
        """A fresh worker node (default {"pad_node": 100}), for a test that removes one: later
        tests still find the resources they need. Returns the node handle; its id is
        ``node.node_id``."""
        node = self.cluster.add_node(**node_args(**(resources or {"pad_node": 100})))
        self.cluster.wait_for_nodes()
        self.extra_nodes.append(node)
        return node

    def remove_worker(self, node: Any) -> None:
        """Kill a worker node's processes (as a lost machine would), waiting until Ray has
        declared it dead (a few seconds: see FAST_HEALTH_CHECK)."""
        self.cluster.remove_node(node, allow_graceful=False)
        self.cluster.wait_for_nodes()
        if node in self.extra_nodes:
            self.extra_nodes.remove(node)


def connect(address: str) -> None:
    """This process as a quiet driver of the cluster, in the project's namespace."""
    import ray

    ray.init(
        address=address,
        namespace=NAMESPACE,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )


@pytest.fixture(scope="package")
def ray_cluster() -> Iterator[RayCluster]:
    """Head + two workers on 127.0.0.1, this process connected as a driver; all shut down at
    the end, also when starting fails half way. Skips, saying what to install, without Ray."""
    ray = pytest.importorskip("ray", reason=RAY_MISSING)
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    ray_constants.ENABLE_RAY_CLUSTER = False  # the same, should Ray have been imported earlier
    cluster = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={
            **node_args(head=1),
            "include_dashboard": False,
            "_system_config": FAST_HEALTH_CHECK,
        },
    )
    try:
        node_a = cluster.add_node(**node_args(node_a=100, pad_node=100))
        node_b = cluster.add_node(**node_args(node_b=100, pad_node=100))
        cluster.wait_for_nodes()
        connect(cluster.address)
        yield RayCluster(cluster=cluster, node_a=node_a, node_b=node_b)
    finally:
        ray.shutdown()
        cluster.shutdown()


def end_pads(namespace: str) -> None:
    """Kill every pad actor of ``namespace`` (a stopping manager leaves them running: the
    cluster holds them), so tests do not pile them up on the session's cluster."""
    import ray

    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry.get("namespace") == namespace:
            with contextlib.suppress(Exception):
                ray.kill(ray.get_actor(entry["name"], namespace=namespace), no_restart=True)
