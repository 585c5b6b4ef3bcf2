"""Secrets a process holds outside the vault, registered with the scrubber when it starts:
provider API keys and tokens in its environment, and Scratchpad's own keys: the server's
(``SCRATCHPAD_API_KEY``, or the one generated into ``<home>/api_key``) and the vault's
(``SCRATCHPAD_VAULT_KEY``, or ``<home>/vault.key``; a key in the OS keyring is registered
when the vault resolves it, see ``keys.resolve_key``)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from scratchpad.config import Settings
from scratchpad.scrub import register
from scratchpad.vault.keys import key_path

# Variables whose values are secrets by their name: provider keys, tokens, passwords (also
# spelt short: PGPASS, MYSQL_PWD; not PWD and OLDPWD, the shell's working directories).
SECRET_VARIABLE = re.compile(
    r"(?!(?:OLD)?PWD$)(?:^|.*_)(?:API_?KEY|TOKEN|SECRET|SECRET_ACCESS_KEY|SESSION_TOKEN|PASSWORD"
    r"|PASSWD|PRIVATE_KEY|ACCESS_KEY|AUTH|CREDENTIALS?|[A-Z]*PASS|[A-Z]*PWD|PW)$",
    re.IGNORECASE,
)


def environment_secrets(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """(value, variable) of every variable named like a secret."""
    return [(value, name) for name, value in environ.items() if SECRET_VARIABLE.match(name)]


def register_process_secrets(settings: Settings, environ: Mapping[str, str] | None = None) -> int:
    """Tell the scrubber this process's secrets (its environment's keys, the settings' keys
    and the key files of the home); how many new forms that made. Cheap when nothing is new."""
    found = environment_secrets(os.environ if environ is None else environ)
    for name, value in (
        ("SCRATCHPAD_API_KEY", settings.api_key),
        ("SCRATCHPAD_REMOTE_API_KEY", settings.remote_api_key),
        ("SCRATCHPAD_VAULT_KEY", settings.vault_key),
    ):
        if value:
            found.append((value, name))
    return register(found + stored_keys(settings))


def stored_keys(settings: Settings) -> list[tuple[str, str]]:
    """(value, variable) of the keys kept in files of the home: the vault's and the
    server's (a file that is missing or unreadable gives nothing)."""
    found = []
    for path, name in (
        (key_path(settings), "SCRATCHPAD_VAULT_KEY"),
        (settings.api_key_path, "SCRATCHPAD_API_KEY"),
    ):
        try:
            value = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if value:
            found.append((value, name))
    return found
