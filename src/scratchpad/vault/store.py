"""``Vault``: encrypted connections on disk, their grants to pads, and the audit of both.

One Fernet-encrypted JSON file per connection in ``<home>/vault/`` (0700; files 0600, written
atomically; a full disk raises DiskFullError naming the home and changes nothing). The key
lives outside that directory (see :mod:`scratchpad.vault.keys`). Every secret value the
vault reads or writes is registered with the process's scrubber under its variable name, and
all of them before the vault answers its first question, so a server that opens its vault at
start knows every secret before any output leaves it.

Callers that must follow changes (the pad manager updates running pads) ``subscribe``: each
save, delete, grant and revoke calls them with (event, engine, name) after it is on disk.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from scratchpad.config import Settings
from scratchpad.errors import (
    DiskFullError,
    InvalidInputError,
    VaultError,
    VaultNotFoundError,
    VaultRecordError,
)
from scratchpad.fsutil import (
    PRIVATE_FILE_MODE,
    atomic_write_bytes,
    create_exclusive,
    disk_full_in,
    private_dir,
)
from scratchpad.scrub import register
from scratchpad.vault import records
from scratchpad.vault.audit import AuditLog, Event
from scratchpad.vault.dotenv import ENV_FILE, read_env_file, secrets_of
from scratchpad.vault.grants import Connection, Grants
from scratchpad.vault.keys import Keyring, resolve_key, system_keyring
from scratchpad.vault.names import (
    RECORD_SUFFIX,
    check_name,
    env_prefix,
    file_name,
    parse_file_name,
)
from scratchpad.vault.records import KEEP, Record

log = logging.getLogger(__name__)
VAULT_DIR = "vault"
Listener = Callable[[str, str, str], None]
Connections = list[Connection]  # (the method Vault.list hides the builtin in the class)
Records = list[Record]
Texts = list[str]
_SYSTEM = object()  # "use the keyring package if it is there"

__all__ = ["KEEP", "Vault"]


class Vault:
    """The connections of one home directory (see the module docstring)."""

    def __init__(self, settings: Settings | None = None, *, keyring: Any = _SYSTEM) -> None:
        self.settings = settings or Settings.load()
        self.directory = self.settings.home / VAULT_DIR
        self.audit = AuditLog(self.directory)
        self._grants = Grants(self.directory, self.settings.vault_default_grant)
        self._keyring: Keyring | None = system_keyring() if keyring is _SYSTEM else keyring
        self._cipher: Any = None
        self._lock = threading.RLock()
        self._primed = False
        self._listeners: list[Listener] = []

    # -- records ----------------------------------------------------------------------------
    def save(
        self,
        engine: str,
        name: str,
        fields: Mapping[str, object],
        secure_keys: Iterable[str] | None = None,
    ) -> Record:
        """Store a connection (see :mod:`scratchpad.vault.records` for the editing rules);
        the stored record, secrets masked."""
        self.prime()
        check_name(engine, "engine")
        check_name(name, "connection name")
        with self._lock, disk_full_in(self.settings.home):
            old = self._read(engine, name) if self._path(engine, name).exists() else None
            record = records.build(engine, name, fields, secure_keys, old)
            self._check_no_clash(engine, name)
            atomic_write_bytes(self._path(engine, name), self._seal(record), mode=PRIVATE_FILE_MODE)
        register(records.secrets_of(record))
        self._changed("save", engine, name)
        return records.masked(record)

    def add(
        self,
        engine: str,
        fields: Mapping[str, object],
        secure_keys: Iterable[str] | None = None,
        *,
        name: str | None = None,
    ) -> Record:
        """Store a new connection, never replacing one: under ``name`` when it is free, else
        ``name-2``, ``name-3``, ... (without a name: "1", "2", ...). The file is created
        exclusively, so two processes adding at once get two connections."""
        self.prime()
        check_name(engine, "engine")
        if name is not None:
            check_name(name, "connection name")
        with self._lock, disk_full_in(self.settings.home):
            for candidate in self._free_names(engine, name):
                record = records.build(engine, candidate, fields, secure_keys, None)
                if create_exclusive(self._path(engine, candidate), self._seal(record)):
                    break
        register(records.secrets_of(record))
        self._changed("save", engine, candidate)
        return records.masked(record)

    def _free_names(self, engine: str, base: str | None) -> Iterator[str]:
        """Names not taken (on disk or by a clash of variables) at the time asked."""
        for number in itertools.count(1):
            if base is None:
                candidate = str(number)
            else:
                candidate = base if number == 1 else f"{base[:60]}-{number}"
            if not self._path(engine, candidate).exists() and not self._clash(engine, candidate):
                yield candidate

    def _seal(self, record: Record) -> bytes:
        data = json.dumps(record, ensure_ascii=False).encode("utf-8")
        private_dir(self.directory)
        sealed: bytes = self._fernet(create=True).encrypt(data)
        return sealed

    def load(self, engine: str, name: str) -> dict[str, str]:
        """The connection's field values (for code that must use them)."""
        self.prime()
        return dict(self._read(engine, name)["fields"])

    def record(self, engine: str, name: str) -> Record:
        """The whole record with every secret value replaced by :data:`KEEP`."""
        self.prime()
        return records.masked(self._read(engine, name))

    def env_for(self, engine: str, name: str) -> dict[str, str]:
        """The ``DS_*`` variables of the connection."""
        self.prime()
        return records.env_of(self._read(engine, name))

    def list(self) -> Records:
        """A summary of every connection (names, never values); a record that cannot be read
        is listed with its ``file`` and an ``error`` instead of failing the list."""
        entries: Records = []
        for engine, name in self.connections():
            try:
                record = self._read(engine, name)
            except VaultRecordError as exc:
                entries.append({"engine": engine, "name": name, "error": str(exc),
                                "file": self._path(engine, name).name})  # fmt: skip
                continue
            entries.append(records.summary(record))
        return entries

    def delete(self, engine: str, name: str) -> None:
        """Remove a connection (VaultNotFoundError when there is none)."""
        path = self._path(engine, name)
        with self._lock, disk_full_in(self.settings.home):
            try:
                path.unlink()
            except FileNotFoundError:
                raise self._not_found(engine, name) from None
            self._grants.forget(engine, name)
        self._changed("delete", engine, name)

    def next_name(self, engine: str) -> str:
        """A free connection name for ``engine``: "1", "2", ... (never an existing one)."""
        check_name(engine, "engine")
        return next(self._free_names(engine, None))

    def validate(
        self, engine: object, name: object, fields: object, secure_keys: object = None
    ) -> Texts:
        """What is wrong with saving these (an empty list: nothing), without saving."""
        old = None
        if isinstance(engine, str) and isinstance(name, str):
            try:
                old = self._read(engine, name) if self._path(engine, name).exists() else None
            except (VaultError, InvalidInputError):
                old = None  # problems() names bad names; a broken record is no template
        found = records.problems(engine, name, fields, secure_keys, old)
        if not found and isinstance(engine, str) and isinstance(name, str):
            clash = self._clash(engine, name)
            found += [self._clash_message(engine, name, clash)] if clash else []
        return found

    def connections(self) -> Connections:
        """(engine, name) of every stored record, readable or not, sorted."""
        if not self.directory.is_dir():
            return []
        found = (parse_file_name(p.name) for p in self.directory.glob(f"*{RECORD_SUFFIX}"))
        return sorted(c for c in found if c is not None)

    # -- grants -----------------------------------------------------------------------------
    def grants(self, pad: str) -> Connections:
        """The connections pad ``pad`` gets."""
        return self._grants.connections(pad, self.connections())

    def grants_of(self, pads: Iterable[str]) -> dict[str, Connections]:
        """The connections each of ``pads`` gets (the vault read once for all of them)."""
        existing = self.connections()
        return {pad: self._grants.connections(pad, existing) for pad in pads}

    def grant(self, pad: str, engine: str, name: str) -> None:
        self._existing(engine, name)
        with disk_full_in(self.settings.home):
            self._grants.grant(pad, engine, name)
        self._changed("grant", engine, name, pad=pad)

    def revoke(self, pad: str, engine: str, name: str) -> None:
        self._existing(engine, name)
        with disk_full_in(self.settings.home):
            self._grants.revoke(pad, engine, name)
        self._changed("revoke", engine, name, pad=pad)

    # -- workspace secrets ------------------------------------------------------------------
    @property
    def env_file(self) -> Path:
        return self.settings.home / ENV_FILE

    def workspace_env(self) -> dict[str, str]:
        """The variables of ``<home>/.env``; those holding secrets are registered with the
        scrubber (see dotenv.secrets_of)."""
        env = read_env_file(self.env_file)
        register(secrets_of(env))
        return env

    # -- changes ----------------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(event, engine, name)`` after every change."""
        self._listeners.append(listener)

    def prime(self) -> None:
        """Register every secret of every readable record with the scrubber (once)."""
        if self._primed:
            return
        with self._lock:
            if self._primed:
                return
            self._primed = True
            for engine, name in self.connections():
                try:
                    self._read(engine, name)
                except VaultRecordError as exc:
                    log.warning("%s", exc)
            self.workspace_env()

    def _changed(self, event: Event, engine: str, name: str, *, pad: str | None = None) -> None:
        """Audit a change that is on disk, and tell the listeners; a full disk that keeps its
        audit line out is logged (the change happened: running pads must follow it)."""
        try:
            self.audit.append(event, engine, name, pad=pad)
        except DiskFullError as exc:
            log.error("the audit of %s of %s/%s was not written: %s", event, engine, name, exc)
        for listener in list(self._listeners):
            try:
                listener(event, engine, name)
            except Exception:
                log.exception("a vault listener failed on %s of %s/%s", event, engine, name)

    # -- files ------------------------------------------------------------------------------
    def _path(self, engine: str, name: str) -> Path:
        return self.directory / file_name(engine, name)

    def _read(self, engine: str, name: str) -> Record:
        """The decrypted record, its secrets registered; VaultNotFoundError, VaultRecordError."""
        path = self._path(engine, name)
        try:
            sealed = path.read_bytes()
        except FileNotFoundError:
            raise self._not_found(engine, name) from None
        except OSError as exc:
            raise VaultRecordError(f"cannot read {path}: {exc.strerror}") from exc
        record = self._open(path, sealed)
        if (record["engine"], record["name"]) != (engine, name):
            raise VaultRecordError(f"{path} holds another connection; it was renamed by hand")
        register(records.secrets_of(record))
        return record

    def _open(self, path: Path, sealed: bytes) -> Record:
        from cryptography.fernet import InvalidToken

        cipher = self._fernet(create=False)
        if cipher is None:
            raise VaultRecordError(
                f"{path} cannot be decrypted: there is no vault key (OS keyring, "
                "SCRATCHPAD_VAULT_KEY or vault.key); restore the key it was written with"
            )
        try:
            return records.check_shape(json.loads(cipher.decrypt(sealed)))
        except InvalidToken:
            raise VaultRecordError(
                f"{path} cannot be decrypted with this vault's key (written with another key, "
                "or damaged); restore that key, or delete the record and save it again"
            ) from None
        except ValueError as exc:
            raise VaultRecordError(f"{path} is damaged ({exc}); delete it and save again") from exc

    def _fernet(self, *, create: bool) -> Any:
        with self._lock:
            if self._cipher is None:
                key = resolve_key(self.settings, self._keyring, create=create)
                if key is None:
                    return None
                from cryptography.fernet import Fernet

                self._cipher = Fernet(key)
            return self._cipher

    def _existing(self, engine: str, name: str) -> None:
        if not self._path(engine, name).exists():
            raise self._not_found(engine, name)

    def _not_found(self, engine: str, name: str) -> VaultNotFoundError:
        return VaultNotFoundError(
            f"no connection {engine}/{name} in the vault; see the list with: scratchpad vault ls"
        )

    def _clash(self, engine: str, name: str) -> Connection | None:
        """Another connection whose variables would have the same names, if any."""
        prefix = env_prefix(engine, name)
        for other in self.connections():
            if other != (engine, name) and env_prefix(*other) == prefix:
                return other
        return None

    def _check_no_clash(self, engine: str, name: str) -> None:
        clash = self._clash(engine, name)
        if clash is not None:
            raise InvalidInputError(self._clash_message(engine, name, clash))

    @staticmethod
    def _clash_message(engine: str, name: str, clash: Connection) -> str:
        return (
            f"{engine}/{name} would export the same variables ({env_prefix(engine, name)}*) as "
            f"{clash[0]}/{clash[1]}; pick another name"
        )
