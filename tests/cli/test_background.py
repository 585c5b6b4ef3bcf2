"""Starting the background server: a server that never answers as itself is not left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from scratchpad.cli import background
from scratchpad.config import Settings
from scratchpad.errors import ConfigError
from scratchpad.server.state import ServerRecord, read_record
from tests.process_helpers import process_gone


def test_a_server_that_fails_the_identity_check_is_stopped(
    hermetic_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []

    def refuses(record: ServerRecord, key: str) -> bool:
        seen.append(record.pid)
        raise ConfigError("the server refused this home's key")

    monkeypatch.setattr(background, "_identifies", refuses)
    settings = Settings(home=hermetic_env)
    with pytest.raises(ConfigError, match="refused"):
        background.start_background(settings)
    assert seen and all(process_gone(pid) for pid in seen)
    assert read_record(settings) is None
