"""Ordinary mistakes get one line, ``error: ...``, and exit code 2 — never a traceback.

Each case runs through typer's runner; the ones whose failure used to escape as a traceback
run as a real subprocess too (the runner would swallow a traceback into ``exception``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scratchpad.cli.app import app
from scratchpad.config import Settings
from scratchpad.errors import ConfigError
from scratchpad.server.state import read_record

runner = CliRunner()


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    return result.exit_code, result.stdout, result.stderr


def scratchpad(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    command = [sys.executable, "-m", "scratchpad.cli", *args]
    done = subprocess.run(
        command, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=60
    )
    return done.returncode, done.stdout, done.stderr


def assert_one_line_error(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for word in words:
        assert word in err, err


@pytest.fixture
def not_utf8(tmp_path: Path) -> Path:
    path = tmp_path / "latin1.py"
    path.write_bytes("print('café')\n".encode("latin-1"))
    return path


def test_exec_of_a_file_that_is_not_utf8(not_utf8: Path) -> None:
    for run in (invoke, scratchpad):
        code, _, err = run("exec", "main", "-f", str(not_utf8))
        assert_one_line_error(code, err, str(not_utf8), "UTF-8")


@pytest.mark.parametrize("where", ["missing/notes.ipynb", ".", "a-file/notes.ipynb"])
def test_dump_ipynb_to_a_path_it_cannot_write(
    where: str, tmp_path: Path, hermetic_env: Path
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    target = tmp_path / where
    for run in (invoke, scratchpad):
        code, _, err = run("dump", "main", "--ipynb", str(target))
        assert_one_line_error(code, err, "--ipynb")
    assert read_record(Settings(home=hermetic_env)) is None  # refused before any server


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_serve_refuses_a_port_out_of_range(port: str) -> None:
    for run in (invoke, scratchpad):
        code, _, err = run("serve", "--port", port)
        assert_one_line_error(code, err, "--port", port)


def test_agent_init_where_it_cannot_write(tmp_path: Path) -> None:
    blocker = tmp_path / "somefile"
    blocker.write_text("a file, not a directory")
    for run in (invoke, scratchpad):
        code, _, err = run("agent", "init", str(blocker / "agent"))
        assert_one_line_error(code, err, str(blocker / "agent"))


def test_a_remote_url_without_a_scheme_names_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"SCRATCHPAD_REMOTE_URL.*http://"):
        Settings.load(remote_url="localhost:8765")
    assert Settings.load(remote_url="https://pads.example:8765").remote_url
    env = {
        "SCRATCHPAD_BACKEND": "remote",
        "SCRATCHPAD_REMOTE_URL": "localhost:8765",
        "SCRATCHPAD_REMOTE_API_KEY": "k",
    }
    for run in (invoke, scratchpad):
        code, _, err = run("ls", env=env)
        assert_one_line_error(code, err, "SCRATCHPAD_REMOTE_URL", "http://")


def test_a_home_that_is_a_file(tmp_path: Path) -> None:
    home = tmp_path / "home-file"
    home.write_text("")
    for command in (["ls"], ["obs", "ls"]):
        code, _, err = scratchpad(*command, env={"SCRATCHPAD_HOME": str(home)})
        assert_one_line_error(code, err, str(home))


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["exec"], ["Missing argument", "See 'scratchpad exec -h'"]),
        (["exec", "main", "--nope"], ["--nope", "See 'scratchpad exec -h'"]),
        (["agent", "run", "x", "--every", "-1"], ["--every", "See 'scratchpad agent run -h'"]),
        (["obs", "read"], ["Missing argument", "See 'scratchpad obs read -h'"]),
        (["no-such-command"], ["no-such-command", "See 'scratchpad -h'"]),
    ],
)
def test_usage_mistakes_are_one_line(args: list[str], words: list[str]) -> None:
    code, _, err = scratchpad(*args)
    assert_one_line_error(code, err, *words)


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("--timeout", "nan", "it must be a number of seconds > 0, not nan"),
        ("--timeout", "inf", "it must be a number of seconds > 0, not inf"),
        ("--timeout", "-1", "it must be a number of seconds > 0, not -1.0"),
        ("--timeout", "0", "it must be a number of seconds > 0, not 0.0"),
        ("--estimate", "nan", "it must be a number of seconds >= 0 (0: no estimate), not nan"),
        ("--estimate", "-inf", "it must be a number of seconds >= 0 (0: no estimate), not -inf"),
        ("--estimate", "-5", "it must be a number of seconds >= 0 (0: no estimate), not -5.0"),
    ],
)
def test_exec_refuses_a_meaningless_number_of_seconds_before_anything_starts(
    option: str, value: str, words: str, hermetic_env: Path
) -> None:
    for run in (invoke, scratchpad):
        code, _, err = run("exec", "main", "1 + 1", option, value)
        assert_one_line_error(code, err, f"Invalid value for '{option}'", words)
    assert read_record(Settings(home=hermetic_env)) is None  # no server was started


def test_every_other_duration_refuses_nan_and_infinity_too() -> None:
    for value in ("nan", "inf"):
        code, _, err = scratchpad("agent", "run", "x", "--every", value)
        assert_one_line_error(code, err, "--every", f"{value} is not a finite number")


@pytest.mark.parametrize(
    ("args", "stdin", "why"),
    [
        (["exec", "main", "-"], "", "standard input was empty"),
        (["exec", "main"], "", "standard input was empty"),
        (["exec", "main", "-"], "  \n\n", "standard input was empty"),
        (["exec", "main", ""], None, "the CODE argument is empty"),
    ],
)
def test_exec_without_code_is_an_error_not_an_empty_cell(
    args: list[str], stdin: str | None, why: str, hermetic_env: Path
) -> None:
    result = runner.invoke(app, args, input=stdin)
    assert_one_line_error(result.exit_code, result.stderr, "no code given", why)
    assert read_record(Settings(home=hermetic_env)) is None  # nothing was sent anywhere


def test_exec_with_empty_stdin_as_a_real_process(tmp_path: Path) -> None:
    empty = tmp_path / "empty.py"
    empty.write_text("")
    command = [sys.executable, "-m", "scratchpad.cli", "exec", "main"]
    for extra, stdin in (([], subprocess.DEVNULL), (["-"], subprocess.DEVNULL)):
        done = subprocess.run(
            [*command, *extra], stdin=stdin, capture_output=True, text=True, timeout=60
        )
        assert_one_line_error(done.returncode, done.stderr, "standard input was empty")
    code, _, err = scratchpad("exec", "main", "-f", str(empty))
    assert_one_line_error(code, err, f"{empty} is empty")
