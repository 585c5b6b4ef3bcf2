"""``exec --cpus/--gpus/--memory/--resource``: the pad's placement on a Ray cluster, sent as
the ``resources`` of its server's start. The background server of the test's home runs pads
locally, so it refuses them (saying SCRATCHPAD_BACKEND=ray is needed), and nothing starts;
a malformed option is a usage error before any server is asked."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from scratchpad.cli.app import app
from scratchpad.cli.placement import asked_resources

runner = CliRunner()
NEEDS_RAY = "need SCRATCHPAD_BACKEND=ray; these pads run with SCRATCHPAD_BACKEND=local"


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_the_options_become_the_resources_of_the_start() -> None:
    assert asked_resources(None, None, None, None) is None
    asked = asked_resources(2.0, 1.0, 4096, ["gpu_node=1", " big = 0.5"])
    assert asked == {"cpus": 2.0, "gpus": 1.0, "memory_mb": 4096,
                     "custom": {"gpu_node": 1.0, "big": 0.5}}  # fmt: skip


@pytest.mark.parametrize(
    "options",
    [["--cpus", "1"], ["--gpus", "1", "--detach"], ["--memory", "2048"], ["--resource", "a=1"]],
)
def test_a_local_server_refuses_placement_and_starts_nothing(options: list[str]) -> None:
    code, out, err = invoke("exec", "placed", "made = 1", *options)
    assert code == 2, (out, err)
    assert NEEDS_RAY in " ".join(err.split()), err  # the server's words (wrapped to the width)
    listed = invoke("ls", "--json")
    assert listed[0] == 0, listed
    assert [pad["name"] for pad in json.loads(listed[1])] == []


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--cpus", "-1"], "-1 is negative; give 0 or more"),
        (["--memory", "lots"], "Invalid value for '--memory': Input should be a valid integer"),
        (["--resource", "gpu_node"], "'gpu_node' is not NAME=AMOUNT"),
        (["--resource", "=1"], "'=1' is not NAME=AMOUNT"),
        (["--resource", "gpu_node=many"], "'gpu_node=many' is not NAME=AMOUNT"),
    ],
)
def test_a_malformed_option_is_a_usage_error(options: list[str], words: str) -> None:
    code, _out, err = invoke("exec", "placed", "made = 1", *options)
    assert code == 2
    assert words in " ".join(err.split()), err


def test_exec_without_placement_is_unchanged() -> None:
    code, out, err = invoke("exec", "plain", "40 + 2")
    assert code == 0, err
    assert "Out: 42" in out
