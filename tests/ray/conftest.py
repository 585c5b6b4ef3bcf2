"""The Ray backend's tests share one real local cluster (see cluster.py)."""

from tests.ray.cluster import ray_cluster  # noqa: F401 - the fixture, for this package
