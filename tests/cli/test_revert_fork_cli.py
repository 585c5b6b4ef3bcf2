"""``scratchpad revert PAD`` and ``scratchpad fork SRC DST`` through typer's runner (the
commands talk to the background server of the test's home)."""

from __future__ import annotations

from typer.testing import CliRunner

from scratchpad.cli.app import app

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_revert_and_fork_from_the_command_line() -> None:
    code, _, err = invoke("revert", "nothing-here")
    assert code == 2 and "no pad named 'nothing-here'" in err
    assert invoke("exec", "main", "a = [1]")[0] == 0
    code, _, err = invoke("revert", "main")
    assert code == 2 and "nothing to revert" in err
    assert invoke("exec", "main", "a.append(2)")[0] == 0
    code, out, err = invoke("revert", "main")
    assert code == 0, err
    assert "reverted pad main: its variables are as they were after cell 1" in out
    assert "Out: [1]" in invoke("exec", "main", "a")[1]

    code, out, err = invoke("fork", "main", "copy")
    assert code == 0, err
    assert "forked pad main into copy (3 cells, asleep)" in out
    code, _, err = invoke("fork", "main", "copy")
    assert code == 2 and "exists already" in err
    assert "Out: [1, 3]" in invoke("exec", "copy", "a + [3]")[1]
    assert "copy" in invoke("ls")[1]
