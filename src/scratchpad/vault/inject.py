"""What a pad gets from the vault: the ``DS_*`` variables of its granted connections and the
workspace ``.env`` — and what the model is told of them (names, never values)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scratchpad.errors import ScratchpadError
from scratchpad.vault.audit import Event

if TYPE_CHECKING:
    from scratchpad.vault.store import Vault

log = logging.getLogger(__name__)


def pad_env(vault: Vault, pad: str, *, audit: Event | None = "inject") -> dict[str, str]:
    """The variables pad ``pad`` gets now, each connection audited as ``audit``.

    A connection that cannot be read (corrupt, another key) is left out with a warning: a
    pad without one credential is better than a pad that cannot start.
    """
    try:
        env = vault.workspace_env()
        granted = vault.grants(pad)
    except (ScratchpadError, OSError) as exc:
        log.warning("pad %r gets no vault variables: %s", pad, exc)
        return {}
    for engine, name in granted:
        try:
            env.update(vault.env_for(engine, name))
        except ScratchpadError as exc:
            log.warning("pad %r does not get %s/%s: %s", pad, engine, name, exc)
            continue
        if audit is not None:
            vault.audit.append(audit, engine, name, pad=pad)
    return env


def credential_names(vault: Vault) -> list[tuple[str, list[str]]]:
    """(where from, variable names) of every credential a pad may get: each readable
    connection as ``engine/name``, and the workspace ``.env``."""
    found: list[tuple[str, list[str]]] = []
    try:
        for entry in vault.list():
            if entry.get("env"):
                found.append((f"{entry['engine']}/{entry['name']}", list(entry["env"])))
        workspace = sorted(vault.workspace_env())
    except (ScratchpadError, OSError) as exc:
        log.warning("the vault cannot be listed: %s", exc)
        return found
    if workspace:
        found.append(("workspace .env", workspace))
    return found


def describe_credentials(vault: Vault) -> str:
    """The sentence the scratchpad tool's description carries about credentials ("" when
    there are none)."""
    names = credential_names(vault)
    if not names:
        return ""
    which = "every pad" if vault.settings.vault_default_grant == "all" else "pads granted them"
    listed = "; ".join(f"{', '.join(env)} ({source})" for source, env in names)
    return (
        f" Credentials in os.environ of {which} (read them from os.environ; never print "
        f"their values): {listed}."
    )
