"""The command line, through typer's runner and as a real subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scratchpad.cli.app import app

runner = CliRunner()


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_exec_prints_output_and_result() -> None:
    code, out, err = invoke("exec", "main", "print('hello')\n40 + 2")
    assert code == 0, err
    assert "hello" in out
    assert "Out: 42" in out
    assert "[ok]" in err


def test_exec_reports_errors_with_exit_code_1() -> None:
    code, _, err = invoke("exec", "main", "1/0")
    assert code == 1
    assert "ZeroDivisionError" in err and "[error]" in err


def test_exec_from_file_and_stdin(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text("print('from file')")
    assert "from file" in invoke("exec", "main", "-f", str(script))[1]
    assert "from stdin" in invoke("exec", "main", "-", stdin="print('from stdin')")[1]


def test_exec_json_output() -> None:
    code, out, _ = invoke("exec", "main", "--json", "6 * 7")
    assert code == 0
    assert json.loads(out)["result"] == "42"


def test_cells_are_shown_with_their_number_and_exec_takes_an_id() -> None:
    assert "[ok] cell 1 · " in invoke("exec", "main", "x = 1")[2]
    code, _, err = invoke("exec", "main", "--id", "step-2", "x += 1\n1/0")
    assert code == 1 and "[error] cell 2 · " in err and '"<cell 2>"' in err
    code, out, _ = invoke("exec", "main", "--json", "--id", "step-2", "x += 1\n1/0")
    assert json.loads(out)["number"] == 2 and json.loads(out)["id"] == "step-2"  # not run again
    assert json.loads(invoke("exec", "main", "--json", "x")[1])["result"] == "2"
    assert "--- [3] cell (ok" in invoke("view", "main")[1]
    code, _, err = invoke("exec", "main", "--id", "no spaces", "1")
    assert code == 2 and "cell id 'no spaces' is not allowed" in err


def test_exec_shows_what_the_cell_logged_and_each_progress_message_once() -> None:
    code = "import logging\nprogress('step 1')\nlogging.warning('careful: %s', 'x')\nprint('done')"
    status, out, err = invoke("exec", "main", code)
    assert status == 0 and "done" in out
    assert "WARNING root: careful: x" in err  # in the cell's logs, and on the terminal
    assert err.count("step 1") == 1  # shown live, not again with the logs


def test_view_dump_ls_and_rm(tmp_path: Path) -> None:
    invoke("exec", "notes", "-d", "first cell", "print('kept on disk')")
    code, out, _ = invoke("view", "notes")
    assert code == 0 and "first cell" in out and "kept on disk" in out
    assert "## [1] first cell" in invoke("dump", "notes")[1]
    target = tmp_path / "notes.ipynb"
    assert invoke("dump", "notes", "--ipynb", str(target))[0] == 0
    assert json.loads(target.read_text())["nbformat"] == 4
    assert invoke("ls")[1].split("\t")[:3] == ["notes", "idle", "1 cells"]
    assert invoke("rm", "notes")[0] == 0
    assert "no pads yet" in invoke("ls")[1]


def test_ls_json_lists_the_pads_for_scripts() -> None:
    code, out, err = invoke("ls", "--json")
    assert code == 0, err
    assert json.loads(out) == []
    invoke("exec", "beta", "1")
    invoke("exec", "alpha", "x = 1")
    invoke("exec", "alpha", "x + 1")
    code, out, _ = invoke("ls", "--json")
    keys = ("name", "status", "cells", "queued")
    assert [{key: pad[key] for key in keys} for pad in json.loads(out)] == [
        {"name": "alpha", "status": "idle", "cells": 2, "queued": 0},
        {"name": "beta", "status": "idle", "cells": 1, "queued": 0},
    ]


def test_install_into_a_pad(wheel: Path) -> None:
    code, out, err = invoke("install", "main", str(wheel))
    assert code == 0, err
    code, out, _ = invoke("exec", "main", "import sp_demo_pkg\nsp_demo_pkg.VERSION")
    assert "Out: '1.0'" in out


def test_reset_clears_history() -> None:
    invoke("exec", "main", "print(1)")
    assert invoke("reset", "main")[0] == 0
    assert "no cells yet" in invoke("view", "main")[1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["exec", "bad\x07name", "1"], "invalid pad name"),
        (["view", "nothing-here"], "no pad named 'nothing-here'"),
        (["rm", "nothing-here"], "no pad named 'nothing-here'"),
        (["install", "main", "--", "--index-url=x"], "is not allowed"),
        (["exec", "main", "1", "-f", "x.py"], "not both"),
    ],
)
def test_bad_input_gets_a_clear_message(args: list[str], message: str) -> None:
    code, _, err = invoke(*args)
    assert code == 2
    assert message in err


def test_demo_tours_a_pad_on_the_server() -> None:
    code, out, err = invoke("demo")
    assert code == 0, err
    assert "the pad survived" in out and "ZeroDivisionError" not in out
    assert "IndexError" in err  # "an error is data": the step fails, the pad goes on
    assert "Out: 9" in out  # max(numbers) after the error
