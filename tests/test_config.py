"""Settings come from SCRATCHPAD_* variables; bad values name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.errors import ConfigError


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCRATCHPAD_HOME")
    settings = Settings.load()
    assert settings.home == Path.home() / ".scratchpad"
    assert settings.output_cap_bytes == 8 * 1024 * 1024
    assert settings.kernel_memory_limit_mb is None
    assert settings.install_timeout_s == 120


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SCRATCHPAD_HOME", str(tmp_path / "h"))
    monkeypatch.setenv("SCRATCHPAD_INTERRUPT_GRACE_S", "0.5")
    monkeypatch.setenv("SCRATCHPAD_KERNEL_MEMORY_LIMIT_MB", "512")
    settings = Settings.load()
    assert settings.home == tmp_path / "h"
    assert settings.interrupt_grace_s == 0.5
    assert settings.kernel_memory_limit_mb == 512


def test_home_is_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRATCHPAD_HOME", "~/elsewhere")
    assert Settings.load().home == Path.home() / "elsewhere"


@pytest.mark.parametrize(
    ("variable", "value"),
    [("SCRATCHPAD_OUTPUT_CAP_BYTES", "lots"), ("SCRATCHPAD_INTERRUPT_GRACE_S", "-1")],
)
def test_bad_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=variable):
        Settings.load()
