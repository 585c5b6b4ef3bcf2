"""Item 3 of the confinement issue, tried the way a hostile model would: in agent mode, neither
a cell of the agent's pad nor its ``shell`` tool can change what drives the agent (rules,
config, state, snapshots, logs) or read the keys of its homes; the shell is confined like a
pad, leaves no process behind, and what it prints is scrubbed. As root (hidden by a mount
namespace, or refused by Landlock alone) and as an unprivileged user."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest

from scratchpad.runtime.inkernel import sandbox
from tests.runtime.agent_attacks import (
    cell_attacks,
    nobody_script,
    shell_attacks,
    unprivileged_answer,
)
from tests.runtime.test_sandbox import namespaces_work, without_namespaces  # noqa: F401
from tests.unprivileged import run_as_nobody

landlock = pytest.mark.skipif(
    sandbox.landlock_abi() == 0, reason="this kernel has no Landlock (Linux >= 5.13, lsm=landlock)"
)
# What the homes and the agent directory hold beside the workspace, by name.
HELD = {"api_key", "vault.key", "vault", "config.yaml", "RULES.md", "scratchpad", "logs"}
_sleeps = itertools.count(1)


@pytest.fixture(params=["hidden", "refused"])
def confined(request: pytest.FixtureRequest, settings: Any) -> str:
    """Pads confined with mount namespaces (the agent directory hidden but its workspace), or
    by Landlock alone (refused)."""
    if request.param == "refused":
        request.getfixturevalue("without_namespaces")
    elif not namespaces_work(settings):
        pytest.skip("this system does not let a process mount in a namespace of its own")
    return str(request.param)


def sleep_token() -> str:
    return f"{700 + next(_sleeps)}.{os.getpid()}"


def as_nobody(scenario: str, *args: object) -> Any:
    done = run_as_nobody(nobody_script(scenario, *args), timeout=300)
    answer = unprivileged_answer(done.stdout)
    assert answer is not None, done.stdout + done.stderr
    return answer


# -- a cell of the agent's pad ---------------------------------------------------------------
def assert_cell_held(answer: dict[str, Any]) -> None:
    """Every write the cell tried was refused and nothing of the agent changed; the next
    cycle, configured from the directory, offers no shell and reads the rules as they were."""
    assert answer["cell"], "the cell did not run"
    reached = {what: how for what, how in answer["cell"].items() if how == "DONE"}
    assert reached == {}, answer["cell"]
    assert answer["changed"] == [] and answer["forged_files"] == []
    assert answer["next_cycle"] == {"offers_shell": False, "rules": answer["rules"]}


@landlock
def test_a_cell_cannot_change_what_drives_its_agent(tmp_path: Path, confined: str) -> None:
    assert_cell_held(cell_attacks(tmp_path))


@landlock
def test_a_cell_cannot_change_what_drives_its_agent_as_a_user() -> None:
    assert_cell_held(as_nobody("cell_attacks"))


# -- the shell tool -----------------------------------------------------------------------------
def assert_shell_held(answer: dict[str, Any], *, hidden: bool) -> None:
    """Nothing of the homes or the agent directory read or changed, nothing written outside
    the workspace, nothing left running, keys that leaked into the workspace shown as their
    labels. Hidden (mount namespaces): not even the names; Landlock alone lets a pad list
    the names of the directories it is kept out of (README, Trust model)."""
    outputs, keys = answer["outputs"], answer["keys"]
    assert answer["offered_shell"]
    for key in keys.values():  # not read, and not shown when it leaked into the workspace
        assert key not in answer["notes"] and key[:12] not in answer["notes"]
    assert "No such file" in outputs["READ"] or "Permission denied" in outputs["READ"]
    listed = outputs["LIST"].split()
    assert "workspace" in listed
    assert not HELD & set(listed) if hidden else "Permission denied" in outputs["READ"], listed
    assert answer["changed"] == [] and answer["outside"] == [] and answer["inside"]
    assert answer["left_running_tagged"] == []
    if hidden:  # only a PID namespace holds a process that left its group and environment
        assert answer["left_running"] == []
    leak = outputs["LEAK"].splitlines()[:-1]  # the exit code last
    assert leak == ["[SCRATCHPAD_API_KEY]", "[SCRATCHPAD_VAULT_KEY]", "[SCRATCHPAD_VAULT_KEY]"]


@landlock
def test_the_shell_tool_is_confined_like_a_pad(tmp_path: Path, confined: str) -> None:
    assert_shell_held(
        shell_attacks(tmp_path, sleep_token(), sleep_token()), hidden=confined == "hidden"
    )


@landlock
def test_the_shell_tool_is_confined_like_a_pad_as_a_user() -> None:
    assert_shell_held(as_nobody("shell_attacks", sleep_token(), sleep_token()), hidden=True)
