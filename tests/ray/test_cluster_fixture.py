"""The Ray cluster fixture gives what the backend's tests rely on: nodes on loopback, placement
by custom resource, and detached named actors that another driver process finds."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import uuid
from typing import Any

import pytest

from tests.process_helpers import default_sigint
from tests.ray.cluster import NAMESPACE, RAY_MISSING, RayCluster

ray = pytest.importorskip("ray", reason=RAY_MISSING)


class _Where:
    """Says which node it runs on."""

    def node_id(self) -> str:
        return str(ray.get_runtime_context().get_node_id())


Where: Any = ray.remote(num_cpus=0)(_Where)


def test_every_node_is_on_loopback(ray_cluster: RayCluster) -> None:
    assert ray_cluster.address.startswith("127.0.0.1:")
    nodes = [node for node in ray.nodes() if node["Alive"]]
    assert len(nodes) >= 3
    assert {node["NodeManagerAddress"] for node in nodes} == {"127.0.0.1"}


def test_a_custom_resource_pins_an_actor_to_its_node(ray_cluster: RayCluster) -> None:
    on_a = Where.options(resources={"node_a": 0.01}).remote()
    on_b = Where.options(resources={"node_b": 0.01}).remote()
    try:
        assert ray.get(on_a.node_id.remote(), timeout=60) == ray_cluster.node_a.node_id
        assert ray.get(on_b.node_id.remote(), timeout=60) == ray_cluster.node_b.node_id
    finally:
        ray.kill(on_a)
        ray.kill(on_b)


def test_a_second_driver_finds_a_detached_named_actor(ray_cluster: RayCluster) -> None:
    name = f"fixture-{uuid.uuid4().hex[:8]}"
    actor = Where.options(
        name=name, namespace=NAMESPACE, lifetime="detached", resources={"node_b": 0.01}
    ).remote()
    try:
        ray.get(actor.node_id.remote(), timeout=60)
        script = textwrap.dedent(f"""
            import logging, ray
            ray.init(address={ray_cluster.address!r}, namespace={NAMESPACE!r},
                     log_to_driver=False, logging_level=logging.ERROR)
            print(ray.get(ray.get_actor({name!r}).node_id.remote(), timeout=60))
            ray.shutdown()
        """)
        found = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=90,
            preexec_fn=default_sigint,
        )
        assert found.returncode == 0, found.stderr[-2000:]
        assert found.stdout.strip().splitlines()[-1] == ray_cluster.node_b.node_id
    finally:
        ray.kill(actor)


def test_a_removed_worker_takes_its_actors_with_it(ray_cluster: RayCluster) -> None:
    """The node-loss helpers: a fresh worker, removed, fails its actors with Ray's node-death
    error; the fixture's own two workers are untouched for later tests."""
    spare = ray_cluster.add_worker(spare=1)
    actor = Where.options(resources={"spare": 0.01}, max_restarts=0).remote()
    assert ray.get(actor.node_id.remote(), timeout=60) == spare.node_id
    ray_cluster.remove_worker(spare)
    deadline = time.monotonic() + 60
    while True:
        try:
            ray.get(actor.node_id.remote(), timeout=30)
        except ray.exceptions.ActorDiedError as died:
            assert "its node has died" in str(died)
            break
        except ray.exceptions.ActorUnavailableError:
            assert time.monotonic() < deadline, "the actor's node was never declared dead"
            time.sleep(0.1)
    alive = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    assert {ray_cluster.node_a.node_id, ray_cluster.node_b.node_id} <= alive
    assert spare.node_id not in alive
