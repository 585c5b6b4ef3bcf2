"""Vault variables in real pads: injected at kernel start, rotated in a running kernel
(same pid), unset on delete and revoke, never in this process's os.environ; the scratchpad
tool's description names them without values."""

from __future__ import annotations

import ast
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from scratchpad.config import Settings
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools.scratchpad_tool import scratchpad_tool
from scratchpad.vault import Vault

PASSWORD = "first-pass-word"
ROTATED = "second-pass-word"
VAR = "DS_POSTGRES_PROD__PASSWORD"
# Read reversed: the scrubber would replace the value itself in the cell's result.
READ = "import os\nos.environ.get({!r}, 'unset')[::-1]"


@pytest.fixture
def vault(workspace: Path, settings: Settings) -> Vault:
    return Vault(settings.with_home(workspace / ".scratchpad"), keyring=None)


@pytest.fixture
async def pads(
    workspace: Path, settings: Settings, vault: Vault
) -> AsyncIterator[ScratchpadManager]:
    manager = ScratchpadManager(workspace=workspace, settings=settings, vault=vault)
    yield manager
    await manager.close_all()


async def read_var(manager: ScratchpadManager, pad: str, name: str = VAR) -> str | None:
    cell = await (await manager.get_or_create(pad)).execute(READ.format(name))
    assert cell.ok, cell.error
    assert cell.result is not None
    return repr(ast.literal_eval(cell.result)[::-1])


async def test_injected_at_start_and_never_in_this_process(
    pads: ScratchpadManager, vault: Vault
) -> None:
    vault.save("postgres", "prod", {"host": "db", "password": PASSWORD})
    (vault.settings.home / ".env").write_text("WS_API_TOKEN=workspace-secret-1\n")
    assert await read_var(pads, "main") == repr(PASSWORD)
    assert await read_var(pads, "main", "DS_POSTGRES_PROD__HOST") == "'db'"
    assert await read_var(pads, "main", "WS_API_TOKEN") == "'workspace-secret-1'"
    assert VAR not in os.environ and "WS_API_TOKEN" not in os.environ
    injected = [e for e in vault.audit.read() if e["event"] == "inject"]
    assert injected[-1] == {**injected[-1], "pad": "main", "engine": "postgres", "name": "prod"}


async def test_rotation_reaches_a_running_pad_without_restart(
    pads: ScratchpadManager, vault: Vault
) -> None:
    vault.save("postgres", "prod", {"host": "db", "password": PASSWORD})
    pad = await pads.get_or_create("main")
    assert isinstance(pad, LocalRuntime)
    pid = pad.pid
    assert await read_var(pads, "main") == repr(PASSWORD)
    vault.save("postgres", "prod", {"host": "db", "password": ROTATED})
    await pads.rotations_done()
    assert await read_var(pads, "main") == repr(ROTATED)
    vault.save("postgres", "prod", {"password": ROTATED})  # host cleared
    await pads.rotations_done()
    assert await read_var(pads, "main", "DS_POSTGRES_PROD__HOST") == "'unset'"
    assert pad.pid == pid
    assert any(e["event"] == "rotate" and e["pad"] == "main" for e in vault.audit.read())


async def test_revoke_and_delete_unset_the_variables(pads: ScratchpadManager, vault: Vault) -> None:
    vault.save("postgres", "prod", {"password": PASSWORD})
    vault.save("mysql", "dev", {"password": "mysql-pass-1"})
    assert await read_var(pads, "main") == repr(PASSWORD)
    vault.revoke("main", "postgres", "prod")
    await pads.rotations_done()
    assert await read_var(pads, "main") == "'unset'"
    vault.grant("main", "postgres", "prod")
    await pads.rotations_done()
    assert await read_var(pads, "main") == repr(PASSWORD)
    vault.delete("mysql", "dev")
    await pads.rotations_done()
    assert await read_var(pads, "main", "DS_MYSQL_DEV__PASSWORD") == "'unset'"


async def test_default_grant_none_gives_nothing_until_granted(
    workspace: Path, settings: Settings
) -> None:
    strict = Settings(**{**settings.model_dump(), "vault_default_grant": "none"})
    vault = Vault(strict.with_home(workspace / ".scratchpad"), keyring=None)
    vault.save("postgres", "prod", {"password": PASSWORD})
    async with ScratchpadManager(workspace=workspace, settings=strict, vault=vault) as manager:
        assert await read_var(manager, "main") == "'unset'"
        vault.grant("main", "postgres", "prod")
        await manager.rotations_done()
        assert await read_var(manager, "main") == repr(PASSWORD)


async def test_the_tool_description_names_variables_not_values(
    pads: ScratchpadManager, vault: Vault
) -> None:
    assert "Credentials" not in scratchpad_tool(pads).description
    vault.save("postgres", "prod", {"host": "db.internal", "password": PASSWORD})
    description = scratchpad_tool(pads).description
    assert "DS_POSTGRES_PROD__HOST, DS_POSTGRES_PROD__PASSWORD (postgres/prod)" in description
    assert PASSWORD not in description and "db.internal" not in description


async def test_saving_a_secret_scrubs_what_the_home_already_stores(
    pads: ScratchpadManager, vault: Vault, workspace: Path
) -> None:
    early = await (await pads.get_or_create("early")).execute(f"print({PASSWORD!r})")
    assert PASSWORD in early.stdout  # nobody knew it was a secret yet
    history = workspace / ".scratchpad" / "pads" / "early" / "history.jsonl"
    assert PASSWORD in history.read_text()
    vault.save("postgres", "prod", {"password": PASSWORD})
    await pads.rotations_done()
    assert PASSWORD not in history.read_text()
    assert f"[{VAR}]" in history.read_text()
    assert PASSWORD not in (await pads.get_or_create("early")).view()
