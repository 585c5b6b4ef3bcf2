"""The secrets a process holds outside the vault: its environment's keys and Scratchpad's own
(the server's API key and the vault key, from settings, files of the home or the keyring)."""

from __future__ import annotations

from pathlib import Path

from cryptography.fernet import Fernet

from scratchpad.config import Settings
from scratchpad.scrub import scrub
from scratchpad.vault.keys import resolve_key
from scratchpad.vault.sources import register_process_secrets
from tests.vault.test_store import MemoryKeyring


def test_the_key_files_of_the_home_are_secrets(tmp_path: Path) -> None:
    """A server's generated key and the vault's key file, written by another process: a
    process that starts on the home scrubs them as their labels."""
    settings = Settings(home=tmp_path / "home")
    settings.home.mkdir()
    server_key = "Zx9_server-generated-key-0123456789abcdef"
    vault_key = Fernet.generate_key().decode()
    (settings.home / "api_key").write_text(f"{server_key}\n")
    (settings.home / "vault.key").write_text(f"{vault_key}\n")
    register_process_secrets(settings, environ={})
    shown = scrub(f"api: {server_key} vault: {vault_key}")
    assert shown == "api: [SCRATCHPAD_API_KEY] vault: [SCRATCHPAD_VAULT_KEY]"


def test_keys_given_as_settings_are_secrets(tmp_path: Path) -> None:
    vault_key = Fernet.generate_key().decode()
    settings = Settings(home=tmp_path, api_key="the-servers-key-0123456789", vault_key=vault_key)
    register_process_secrets(settings, environ={})
    assert scrub(f"{settings.api_key} {vault_key}") == (
        "[SCRATCHPAD_API_KEY] [SCRATCHPAD_VAULT_KEY]"
    )


def test_a_home_without_key_files_registers_nothing_of_them(tmp_path: Path) -> None:
    assert register_process_secrets(Settings(home=tmp_path / "none"), environ={}) == 0


def test_a_vault_key_from_the_keyring_is_a_secret_once_resolved(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    keyring = MemoryKeyring()
    made = resolve_key(settings, keyring, create=True)  # made in the keyring, no file
    assert made is not None and not (settings.home / "vault.key").exists()
    assert scrub(f"key={made.decode()}") == "key=[SCRATCHPAD_VAULT_KEY]"
