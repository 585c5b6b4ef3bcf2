"""The vault store on real files: encryption, modes, editing rules, names, broken records."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from scratchpad.config import Settings
from scratchpad.errors import ConfigError, InvalidInputError, VaultNotFoundError, VaultRecordError
from scratchpad.scrub import scrub
from scratchpad.vault import KEEP, Vault
from scratchpad.vault.keys import KEY_FILE

SECRET = "s3cret-Value-42"


@pytest.fixture
def vault(settings: Settings) -> Vault:
    return Vault(settings, keyring=None)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_round_trip_with_secrets_masked(vault: Vault) -> None:
    shown = vault.save("postgres", "prod", {"host": "db", "password": SECRET, "port": 5432})
    assert shown["fields"] == {"host": "db", "password": KEEP, "port": "5432"}
    assert shown["secure_keys"] == ["password"]
    assert vault.load("postgres", "prod") == {"host": "db", "password": SECRET, "port": "5432"}
    assert vault.record("postgres", "prod")["fields"]["password"] == KEEP
    assert vault.env_for("postgres", "prod") == {
        "DS_POSTGRES_PROD__HOST": "db",
        "DS_POSTGRES_PROD__PASSWORD": SECRET,
        "DS_POSTGRES_PROD__PORT": "5432",
    }
    (entry,) = vault.list()
    assert entry["fields"] == ["host", "password", "port"]
    assert SECRET not in json.dumps(entry)


def test_files_are_private_and_encrypted(vault: Vault, settings: Settings) -> None:
    vault.save("postgres", "prod", {"password": SECRET})
    directory = settings.home / "vault"
    assert mode(directory) == 0o700
    files = list(directory.iterdir())
    assert files and all(mode(f) == 0o600 for f in files)
    assert all(SECRET.encode() not in f.read_bytes() for f in files)
    assert mode(settings.home / KEY_FILE) == 0o600  # outside vault/


def test_a_copied_vault_dir_reveals_nothing_under_another_key(
    vault: Vault, settings: Settings, tmp_path: Path
) -> None:
    vault.save("postgres", "prod", {"password": SECRET})
    other_home = tmp_path / "elsewhere"
    other_home.mkdir()
    shutil.copytree(settings.home / "vault", other_home / "vault")
    thief = Vault(settings.with_home(other_home), keyring=None)
    with pytest.raises(VaultRecordError, match=r"postgres\+prod\.fernet cannot be decrypted"):
        thief.load("postgres", "prod")
    other_key = Fernet.generate_key().decode()
    keyed = Vault(Settings(home=other_home, vault_key=other_key), keyring=None)
    with pytest.raises(VaultRecordError, match="with this vault's key"):
        keyed.record("postgres", "prod")


def test_a_corrupt_record_is_named_and_the_others_still_load(
    vault: Vault, settings: Settings
) -> None:
    vault.save("postgres", "prod", {"password": SECRET})
    vault.save("mysql", "dev", {"host": "h"})
    (settings.home / "vault" / "mysql+dev.fernet").write_bytes(b"garbage")
    with pytest.raises(VaultRecordError, match=r"mysql\+dev\.fernet"):
        vault.load("mysql", "dev")
    listed = {(e["engine"], e["name"]): e for e in Vault(settings, keyring=None).list()}
    broken = listed["mysql", "dev"]
    assert "error" in broken and broken["file"] == "mysql+dev.fernet"
    assert listed["postgres", "prod"]["env"] == ["DS_POSTGRES_PROD__PASSWORD"]


def test_keep_sentinel_clear_and_secret_stays_secret(vault: Vault) -> None:
    first = vault.save("api", "x", {"url": "https://x", "token": SECRET, "note": "n"})
    vault.save("api", "x", {"url": "https://y", "token": KEEP, "note": ""})
    assert vault.load("api", "x") == {"url": "https://y", "token": SECRET}
    vault.save("api", "x", {"url": "https://y", "token": KEEP}, secure_keys=["url"])
    again = vault.record("api", "x")
    assert set(again["secure_keys"]) == {"token", "url"}  # token was secret: it stays
    assert again["created_at"] == first["created_at"]
    with pytest.raises(InvalidInputError, match="no stored value to keep"):
        vault.save("api", "x", {"other": KEEP})


def test_short_secrets_are_refused_with_the_reason(vault: Vault) -> None:
    with pytest.raises(InvalidInputError, match=r"at least 6.*ordinary text"):
        vault.save("api", "x", {"password": "abc"})
    assert vault.connections() == []
    assert vault.validate("api", "x", {"password": "abc"})  # said without saving
    vault.save("api", "x", {"password": "abc"}, secure_keys=[])  # not secret: allowed


def test_names_are_checked_and_cannot_leave_the_directory(vault: Vault) -> None:
    for engine, name in (("../x", "y"), ("x", "a/b"), ("", "y"), (".hidden", "y"), ("x", "y" * 65)):
        with pytest.raises(InvalidInputError, match="letters, digits"):
            vault.save(engine, name, {"host": "h"})
    with pytest.raises(InvalidInputError, match="invalid field name"):
        vault.save("x", "y", {"bad field": "h"})
    with pytest.raises(VaultNotFoundError, match="no connection x/y"):
        vault.load("x", "y")


def test_env_names_and_private_fields(vault: Vault) -> None:
    vault.save("my-db", "eu.1", {"host-name": "h", "_internal": "i"})
    assert vault.env_for("my-db", "eu.1") == {"DS_MY_DB_EU_1__HOST_NAME": "h"}
    with pytest.raises(InvalidInputError, match="same variables"):
        vault.save("my_db", "eu-1", {"host": "h"})


def test_next_name_never_overwrites(vault: Vault) -> None:
    assert vault.next_name("postgres") == "1"
    vault.save("postgres", "1", {"host": "a"})
    vault.save("postgres", "2", {"host": "b"})
    assert vault.next_name("postgres") == "3"
    assert vault.next_name("mysql") == "1"


def test_secrets_are_registered_with_the_scrubber(vault: Vault, settings: Settings) -> None:
    vault.save("postgres", "prod", {"password": "registered-at-save"})
    assert scrub("x registered-at-save") == "x [DS_POSTGRES_PROD__PASSWORD]"
    (settings.home / ".env").write_text("export WS_TOKEN='workspace-token-1'\n")
    Vault(settings, keyring=None).prime()
    assert scrub("workspace-token-1") == "[WS_TOKEN]"


def test_delete(vault: Vault) -> None:
    vault.save("postgres", "prod", {"host": "h"})
    vault.delete("postgres", "prod")
    assert vault.list() == []
    with pytest.raises(VaultNotFoundError):
        vault.delete("postgres", "prod")


def test_a_bad_configured_key_is_a_clear_error(settings: Settings) -> None:
    bad = Vault(Settings(home=settings.home, vault_key="not-a-key"), keyring=None)
    with pytest.raises(ConfigError, match="SCRATCHPAD_VAULT_KEY is not a Fernet key"):
        bad.save("x", "y", {"host": "h"})


def test_the_configured_key_is_used_and_no_key_file_made(settings: Settings) -> None:
    key = Fernet.generate_key().decode()
    keyed = Vault(Settings(home=settings.home, vault_key=key), keyring=None)
    keyed.save("x", "y", {"password": SECRET})
    assert not (settings.home / KEY_FILE).exists()
    assert Vault(Settings(home=settings.home, vault_key=key), keyring=None).load("x", "y")


class MemoryKeyring:
    """A keyring that works (kept in memory)."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, account: str) -> str | None:
        return self.stored.get((service, account))

    def set_password(self, service: str, account: str, password: str) -> None:
        self.stored[service, account] = password


class BrokenKeyring:
    """A keyring whose backend fails, as keyring's 'fail' backend does."""

    def get_password(self, service: str, account: str) -> str | None:
        raise RuntimeError("No recommended backend was available")

    def set_password(self, service: str, account: str, password: str) -> None:
        raise RuntimeError("No recommended backend was available")


def test_a_working_keyring_holds_the_key(settings: Settings) -> None:
    ring = MemoryKeyring()
    Vault(settings, keyring=ring).save("x", "y", {"password": SECRET})
    assert ("scratchpad", str(settings.home)) in ring.stored
    assert not (settings.home / KEY_FILE).exists()
    assert Vault(settings, keyring=ring).load("x", "y")["password"] == SECRET


def test_a_failing_keyring_falls_back_to_the_key_file(settings: Settings) -> None:
    Vault(settings, keyring=BrokenKeyring()).save("x", "y", {"password": SECRET})
    assert (settings.home / KEY_FILE).exists()
    assert Vault(settings, keyring=None).load("x", "y")["password"] == SECRET


def test_a_huge_value_is_refused_saying_the_limit(tmp_path: Path) -> None:
    from scratchpad.vault.records import MAX_VALUE_CHARS

    vault = Vault(Settings(home=tmp_path / "h"), keyring=None)
    with pytest.raises(InvalidInputError, match=f"at most {MAX_VALUE_CHARS}"):
        vault.save("http", "big", {"token": "t" * (MAX_VALUE_CHARS + 1)})
    assert vault.list() == []


def test_values_no_environment_can_hold_are_refused_saying_why(tmp_path: Path) -> None:
    vault = Vault(Settings(home=tmp_path / "h"), keyring=None)
    for value in ("abc\ud800defgh", "abc\x00defgh"):
        with pytest.raises(InvalidInputError, match="NUL or an unpaired surrogate"):
            vault.save("pg", "odd", {"password": value})
    assert vault.list() == []
    vault.save("pg", "odd", {"password": "tab\there-and\nnewline"})  # other controls are fine
