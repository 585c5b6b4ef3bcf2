"""The vault's key: OS keyring, else ``SCRATCHPAD_VAULT_KEY``, else ``<home>/vault.key``.

The key never lives inside ``vault/``, so a copy of that directory alone reveals nothing. A
key once in use stays in use: a key already in the keyring wins, then the configured one, then
an existing key file; only when none exists is one made (in the keyring when it works, else
in the key file, created exclusively so that processes starting together agree on it).
A keyring that is missing or fails (no backend, locked, D-Bus gone) is simply not used.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any, Protocol

from scratchpad.config import Settings
from scratchpad.errors import ConfigError, VaultError
from scratchpad.fsutil import create_exclusive, private_dir
from scratchpad.scrub import register

log = logging.getLogger(__name__)
KEY_FILE = "vault.key"
KEYRING_SERVICE = "scratchpad"
MAKE_KEY = (
    "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
)


class Keyring(Protocol):
    """What the vault uses of the ``keyring`` package (tests pass their own)."""

    def get_password(self, service: str, account: str) -> str | None: ...

    def set_password(self, service: str, account: str, password: str) -> None: ...


def system_keyring() -> Keyring | None:
    """The ``keyring`` package when it is installed, else None."""
    try:
        found: Keyring = importlib.import_module("keyring")  # an optional extra
    except Exception:  # not installed, or broken at import
        return None
    return found


def key_path(settings: Settings) -> Path:
    return settings.home / KEY_FILE


def resolve_key(settings: Settings, keyring: Keyring | None, *, create: bool) -> bytes | None:
    """The key as bytes; None when there is none yet and ``create`` is false. The scrubber
    knows it from then on, wherever it came from."""
    key = _resolve(settings, keyring, create=create)
    if key is not None:
        register([(key.decode("ascii", "replace"), "SCRATCHPAD_VAULT_KEY")])
    return key


def _resolve(settings: Settings, keyring: Keyring | None, *, create: bool) -> bytes | None:
    account = str(settings.home)
    stored = _keyring_get(keyring, account)
    if stored:
        return checked(stored, "the key in the OS keyring")
    if settings.vault_key:
        return checked(settings.vault_key, "SCRATCHPAD_VAULT_KEY")
    path = key_path(settings)
    existing = _read_file(path)
    if existing is not None or not create:
        return existing
    new: bytes = _fernet_class().generate_key()
    if _keyring_set(keyring, account, new.decode("ascii")):
        return new
    private_dir(settings.home)
    if create_exclusive(path, new + b"\n", mode=0o600):
        return new
    return _read_file(path)  # another process made it first: its key is the key


def checked(key: str | bytes, source: str) -> bytes:
    """``key`` as bytes once it is known to be a Fernet key, else ConfigError naming it."""
    raw = key.strip().encode("ascii", "replace") if isinstance(key, str) else key.strip()
    try:
        _fernet_class()(raw)
    except (ValueError, TypeError):
        raise ConfigError(
            f"{source} is not a Fernet key (32 bytes, URL-safe base64: 44 characters); "
            f"make one with {MAKE_KEY}"
        ) from None
    return raw


def _read_file(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise VaultError(f"cannot read the vault key {path}: {exc.strerror}") from exc
    return checked(data, str(path))


def _keyring_get(keyring: Keyring | None, account: str) -> str | None:
    if keyring is None:
        return None
    try:
        return keyring.get_password(KEYRING_SERVICE, account)
    except Exception as exc:  # any backend failure means: no keyring here
        log.debug("the OS keyring is not usable (%r); using the next key source", exc)
        return None


def _keyring_set(keyring: Keyring | None, account: str, key: str) -> bool:
    if keyring is None:
        return False
    try:
        keyring.set_password(KEYRING_SERVICE, account, key)
        return keyring.get_password(KEYRING_SERVICE, account) == key
    except Exception as exc:
        log.debug("the OS keyring cannot store the vault key (%r); using a key file", exc)
        return False


def _fernet_class() -> Any:
    from cryptography.fernet import Fernet  # loaded on first use: import scratchpad stays cheap

    return Fernet
