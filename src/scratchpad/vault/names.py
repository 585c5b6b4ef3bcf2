"""Names in the vault: connections (engine, name), their fields, files and variables.

Engines and connection names are checked against one pattern so that a record's file name is
made of them directly, with no way out of ``vault/`` (no ``/``, no leading dot). Variables are
``DS_<ENGINE>_<NAME>__<FIELD>``: upper case, every non-word character made ``_``.
"""

from __future__ import annotations

import re

from scratchpad.errors import InvalidInputError

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
FIELD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
NAME_RULE = "1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit"
FIELD_RULE = "1 to 64 letters, digits, '_', '.' or '-', starting with a letter or '_'"
RECORD_SUFFIX = ".fernet"
SEPARATOR = "+"  # in no engine or name, so "<engine>+<name>" is never ambiguous
SECRET_WORDS = ("password", "passphrase", "secret", "token", "key", "credential", "auth")
PASSWORD_WORD = re.compile(r"(?:^|[^a-z])(?:[a-z]*pass|[a-z]*pwd|pw|passwd)(?![a-z])")
SHELL_DIRECTORIES = frozenset({"pwd", "oldpwd"})


def check_name(value: object, what: str) -> str:
    """``value`` if it can be an engine or connection name, else InvalidInputError."""
    if not isinstance(value, str) or NAME_RE.fullmatch(value) is None:
        raise InvalidInputError(f"invalid {what} {value!r}: use {NAME_RULE}")
    return value


def check_field(value: object) -> str:
    """``value`` if it can name a field, else InvalidInputError."""
    if not isinstance(value, str) or FIELD_RE.fullmatch(value) is None:
        raise InvalidInputError(f"invalid field name {value!r}: use {FIELD_RULE}")
    return value


def file_name(engine: str, name: str) -> str:
    """The record file of a connection (both names already checked)."""
    return f"{check_name(engine, 'engine')}{SEPARATOR}{check_name(name, 'name')}{RECORD_SUFFIX}"


def parse_file_name(file: str) -> tuple[str, str] | None:
    """(engine, name) of a record file name, or None for any other file."""
    if not file.endswith(RECORD_SUFFIX):
        return None
    engine, sep, name = file.removesuffix(RECORD_SUFFIX).partition(SEPARATOR)
    if not sep or NAME_RE.fullmatch(engine) is None or NAME_RE.fullmatch(name) is None:
        return None
    return engine, name


def env_word(text: str) -> str:
    return re.sub(r"\W", "_", text, flags=re.ASCII).upper()


def env_prefix(engine: str, name: str) -> str:
    """``DS_<ENGINE>_<NAME>__``: every variable of the connection starts with it."""
    return f"DS_{env_word(engine)}_{env_word(name)}__"


def env_name(engine: str, name: str, field: str) -> str:
    """The variable a field is exported as."""
    return env_prefix(engine, name) + env_word(field)


def exported(field: str) -> bool:
    """Whether a field reaches pads (fields starting with ``_`` are the vault's own)."""
    return not field.startswith("_")


def looks_secret(field: str) -> bool:
    """The name heuristic used when no ``secure_keys`` are given (and for the variables of
    the workspace ``.env``): a secret word, or a password spelt short (``DB_PASS``,
    ``PGPASS``, ``MYSQL_PWD``, ``db_pw``; not ``PWD``, the shell's working directory)."""
    lowered = field.lower()
    if lowered in SHELL_DIRECTORIES:
        return False
    return (
        any(word in lowered for word in SECRET_WORDS) or PASSWORD_WORD.search(lowered) is not None
    )
