"""Help without type noise, ``-h`` everywhere, and ``--version`` from the package metadata."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

import scratchpad
from scratchpad.cli.app import app
from scratchpad.config import Settings
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.app import create_app

runner = CliRunner()
TYPE_NOISE = re.compile(r"<(bool|str|int|float|path|file|list\[\w+\])>|\[[\d.<=]*x[<>=\d.]*\]")
SRC = Path(scratchpad.__file__).parent


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def command_paths() -> list[list[str]]:
    """Every command and group of the CLI, as the words that name it."""
    found: list[list[str]] = [[]]

    def walk(command: Any, path: list[str]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            found.append([*path, name])
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def help_of(*words: str, flag: str = "--help") -> str:
    result = runner.invoke(app, [*words, flag])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("words", command_paths(), ids=lambda words: " ".join(words) or "-")
def test_every_help_is_plain_and_h_is_help(words: list[str]) -> None:
    text = help_of(*words)
    assert help_of(*words, flag="-h") == text
    assert not TYPE_NOISE.search(text), text
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert "{" not in usage and "<" not in usage and "[[" not in usage, usage
    assert re.search(r"--help\s+-h\s", text), text


@pytest.mark.parametrize(
    ("words", "usage"),
    [
        (["exec"], "scratchpad exec [OPTIONS] PAD [CODE]"),
        (["install"], "scratchpad install [OPTIONS] PAD [PACKAGES...]"),
        (["agent", "diff"], "scratchpad agent diff [OPTIONS] ROOT [CYCLE]"),
        (["obs", "read"], "scratchpad obs read [OPTIONS] ID"),
    ],
)
def test_usage_lines_name_the_arguments(words: list[str], usage: str) -> None:
    assert f"Usage: {usage}" in help_of(*words)


def test_flags_are_plain_and_values_have_metavars() -> None:
    exec_help = help_of("exec")
    assert re.search(r"--json\s+Print the cell as JSON", exec_help), exec_help
    assert re.search(r"--file\s+-f\s+FILE\s", exec_help), exec_help
    assert re.search(r"--estimate\s+SECONDS\s", exec_help), exec_help
    assert re.search(r"--ipynb\s+FILE\s", help_of("dump")), help_of("dump")
    assert re.search(r"--before\s+--after\s+Which", help_of("agent", "restore"))
    assert re.search(r"--port\s+PORT\s", help_of("serve"))


def test_version_comes_from_the_package_metadata(tmp_path: Path) -> None:
    installed = metadata.version("scratchpad")
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"scratchpad {installed}\n"
    assert scratchpad.__version__ == installed
    manager = ScratchpadManager(settings=Settings(home=tmp_path / "home"))
    assert create_app(manager, api_key="k").version == installed
    written = [
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if f'"{installed}"' in path.read_text(encoding="utf-8")
    ]
    assert written == [], f"the version is written in {written}; read it from the metadata"


def test_help_and_version_as_a_real_process() -> None:
    command = [sys.executable, "-m", "scratchpad.cli"]
    shown = subprocess.run([*command, "-h"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "Usage: scratchpad [OPTIONS] COMMAND" in shown.stdout
    version = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.strip() == f"scratchpad {metadata.version('scratchpad')}"
    short = [sys.executable, "-m", "scratchpad", "--version"]  # the package runs as well
    assert subprocess.run(short, capture_output=True, text=True, timeout=60).stdout == (
        version.stdout
    )
