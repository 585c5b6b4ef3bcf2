"""``scratchpad files``: put, ls, get, rm against a real server (a subprocess on loopback),
with errors as one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scratchpad.cli.app import app
from tests.server_helpers import running_server

runner = CliRunner()
KEY = "files-cli-key"


@pytest.fixture
def served(hermetic_env: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A server for the test's home, pad 'main' on disk (stopped); its own directory, where
    its files are, is made by the server when first needed."""
    monkeypatch.setenv("SCRATCHPAD_API_KEY", KEY)
    (hermetic_env / "pads" / "main").mkdir(parents=True)
    with running_server(hermetic_env, hermetic_env.parent, KEY):
        yield hermetic_env / "workspaces" / "main"


def test_put_ls_get_rm(served: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = tmp_path / "report.csv"
    local.write_bytes(b"a,b\n1,2\n")
    put = runner.invoke(app, ["files", "put", "main", str(local), "out/"])
    assert put.exit_code == 0, put.output
    assert "uploaded out/report.csv (8 bytes)" in put.stdout
    assert (served / "out" / "report.csv").read_bytes() == b"a,b\n1,2\n"

    listed = runner.invoke(app, ["files", "ls", "main"])
    assert listed.exit_code == 0, listed.output
    assert "d            -  out/" in listed.stdout.splitlines()
    as_json = json.loads(runner.invoke(app, ["files", "ls", "main", "out", "--json"]).stdout)
    assert [(e["path"], e["size"]) for e in as_json["entries"]] == [("out/report.csv", 8)]

    piped = runner.invoke(app, ["files", "get", "main", "out/report.csv", "-o", "-"])
    assert piped.exit_code == 0 and piped.stdout_bytes == b"a,b\n1,2\n"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "report.csv").unlink()
    saved = runner.invoke(app, ["files", "get", "main", "out/report.csv"])
    assert saved.exit_code == 0, saved.output
    assert (tmp_path / "report.csv").read_bytes() == b"a,b\n1,2\n"

    removed = runner.invoke(app, ["files", "rm", "main", "out/report.csv"])
    assert removed.exit_code == 0 and "deleted out/report.csv" in removed.stdout
    assert not (served / "out" / "report.csv").exists()


def test_errors_are_one_line(served: Path, hermetic_env: Path) -> None:
    (hermetic_env / "vault.key").write_text("HOME-CONTENT")
    served.mkdir(parents=True)
    (served / "home").symlink_to(hermetic_env)  # a cell's link to the home around it
    for args, says in [
        (["get", "main", "../secret"], "holds '..'"),
        (["get", "main", "home/vault.key"], "leads outside the workspace"),
        (["ls", "main", "home"], "leads outside the workspace"),
        (["get", "main", "missing.txt"], "no file 'missing.txt'"),
        (["ls", "nobody"], "no pad named 'nobody'"),
        (["rm", "main", "missing.txt"], "no 'missing.txt'"),
    ]:
        result = runner.invoke(app, ["files", *args])
        assert result.exit_code == 2, result.output
        assert says in result.output and len(result.output.splitlines()) == 1
        assert "HOME-CONTENT" not in result.output and "Traceback" not in result.output
    listed = runner.invoke(app, ["files", "ls", "main"])
    assert "home" not in listed.stdout


def test_a_failed_download_leaves_the_destination(served: Path, tmp_path: Path) -> None:
    dest = tmp_path / "keep.txt"
    dest.write_text("mine")
    result = runner.invoke(app, ["files", "get", "main", "missing.txt", "-o", str(dest)])
    assert result.exit_code == 2 and dest.read_text() == "mine"
