"""The runtime contract (tests/runtime/test_contract.py, written once) on the Ray backend: pads
held by actors of the real local cluster of this package (cluster.py)."""

from __future__ import annotations

import pytest

from tests.ray.cluster import RAY_MISSING
from tests.runtime.test_contract import *  # noqa: F403 - the same tests, here on Ray

pytest.importorskip("ray", reason=RAY_MISSING)


@pytest.fixture(params=["ray"])  # type: ignore[no-redef]
def runtime_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)
