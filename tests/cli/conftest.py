"""CLI pad commands start a background server for the test's home; stop it afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scratchpad.cli.background import stop
from scratchpad.config import Settings


@pytest.fixture(autouse=True)
def stop_background_server(hermetic_env: Path) -> Iterator[None]:
    yield
    stop(Settings(home=hermetic_env))
