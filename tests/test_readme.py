"""Every ``python``, ``sh`` and ``bash`` example in README.md runs as written.

Python blocks run as scripts in a subprocess, shell blocks through ``bash -e -o pipefail``
with this environment's ``bin`` first on PATH; each in its own empty directory, with the test's
own ``SCRATCHPAD_HOME`` and ``HOME``, no provider keys and no network (packages come from a
local wheel, models from the scripted provider). A block that genuinely cannot run is marked in
the README source by ``<!-- not run: why -->`` on the line before it: it is still checked for
syntax, and reported as skipped with that reason. Any server a block starts is stopped.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scratchpad.cli.background import stop
from scratchpad.config import Settings
from tests.conftest import build_wheel

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(?P<why>.+?)\s*-->$")
RUN_TIMEOUT_S = 120
MAX_NOT_RUN = 4  # exclusions stay few: raise this only with a reason in the README


@dataclass(frozen=True)
class Example:
    language: str
    code: str
    line: int
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.language}@README.md:{self.line}"


def readme_examples() -> list[Example]:
    text = README.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        language = match.group(1)
        if language not in ("python", "sh", "bash"):
            continue
        above = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        marker = NOT_RUN.match(above)
        line = text.count("\n", 0, match.start()) + 1
        found.append(Example(language, match.group(2), line, marker and marker["why"]))
    return found


EXAMPLES = readme_examples()


def test_the_readme_has_examples_and_few_exclusions() -> None:
    assert len([e for e in EXAMPLES if e.language == "python"]) >= 4
    assert len([e for e in EXAMPLES if e.language != "python"]) >= 2
    excluded = [f"{e.name}: {e.not_run}" for e in EXAMPLES if e.not_run]
    assert len(excluded) <= MAX_NOT_RUN, excluded
    markers = len(re.findall(r"<!--\s*not run:", README.read_text(encoding="utf-8")))
    assert markers == len(excluded), "a 'not run' marker must sit right before a code block"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.name)
def test_example_is_valid_syntax(example: Example, tmp_path: Path) -> None:
    if example.language == "python":
        compile(example.code, example.name, "exec")
        return
    script = tmp_path / "example.sh"
    script.write_text(example.code)
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


@pytest.fixture
def sandbox(tmp_path: Path, hermetic_env: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """An empty working directory and the environment an example runs in."""
    work, home, wheels = tmp_path / "work", tmp_path / "user-home", tmp_path / "wheels"
    for directory in (work, home, wheels):
        directory.mkdir()
    build_wheel(wheels, "six")  # what the README installs, from a local wheel
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "UV_OFFLINE": "1",
        "UV_FIND_LINKS": str(wheels),
        "UV_NO_INDEX": "1",
    }
    try:
        yield work, env
    finally:
        stop(Settings(home=hermetic_env))  # a background server a CLI example started


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.name)
def test_example_runs(example: Example, sandbox: tuple[Path, dict[str, str]]) -> None:
    if example.not_run:
        pytest.skip(f"not run: {example.not_run}")
    work, env = sandbox
    if example.language == "python":
        script = work / "example.py"
        command = [sys.executable, str(script)]
    else:
        script = work / "example.sh"
        command = ["bash", "-e", "-o", "pipefail", str(script)]
    script.write_text(example.code)
    done = subprocess.run(
        command, cwd=work, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )
    assert done.returncode == 0, (
        f"{example.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
