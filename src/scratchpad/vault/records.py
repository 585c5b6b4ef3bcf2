"""A connection's record and the rules of editing it (pure: no files, no keys).

A record is ``{engine, name, created_at, updated_at, fields, secure_keys}``. Saving replaces
the fields with the ones given, where the keep-sentinel :data:`KEEP` keeps the stored value
and an empty string clears the field; a key once secret stays secret; a secret shorter than
:data:`MIN_SECRET_CHARS` is refused, because the scrubber could not redact it without
redacting ordinary text too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from scratchpad.errors import InvalidInputError
from scratchpad.scrub import MIN_SECRET_CHARS
from scratchpad.vault.audit import now
from scratchpad.vault.names import (
    FIELD_RE,
    FIELD_RULE,
    NAME_RE,
    NAME_RULE,
    env_name,
    exported,
    looks_secret,
)

KEEP = "********"
"""The keep-sentinel: shown instead of every secret value; saved back, it keeps the value."""

Record = dict[str, Any]


MAX_VALUE_CHARS = 64 * 1024  # every secret's forms go into the scrubber's one pattern


def problems(
    engine: object,
    name: object,
    fields: object,
    secure_keys: object = None,
    old: Record | None = None,
) -> list[str]:
    """Everything wrong with a save of these arguments (empty when it would succeed)."""
    found = [
        f"invalid {what} {value!r}: use {NAME_RULE}"
        for what, value in (("engine", engine), ("connection name", name))
        if not isinstance(value, str) or NAME_RE.fullmatch(value) is None
    ]
    if not isinstance(fields, Mapping):
        return [*found, "fields must be an object of field name → text value"]
    if secure_keys is not None and (
        isinstance(secure_keys, str) or not isinstance(secure_keys, Iterable)
    ):
        return [*found, "secure_keys must be a list of field names"]
    named = [*fields, *(secure_keys or [])]
    found += [f"invalid field name {f!r}: use {FIELD_RULE}" for f in named if not _field_ok(f)]
    if found:
        return found
    secret = secret_keys(fields, secure_keys, old)
    old_fields = old["fields"] if old else {}
    for field, value in fields.items():
        found += _value_problems(field, value, field in secret, field in old_fields)
    return found


def _field_ok(field: object) -> bool:
    return isinstance(field, str) and FIELD_RE.fullmatch(field) is not None


def _value_problems(field: str, value: object, secret: bool, stored: bool) -> list[str]:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        kind = type(value).__name__
        return [f"field {field!r}: the value must be text (or a number), not {kind}"]
    text = str(value)
    if "\0" in text or any("\ud800" <= char <= "\udfff" for char in text):
        return [
            f"field {field!r}: the value holds a NUL or an unpaired surrogate; give UTF-8 text "
            "without NUL (it becomes an environment variable)"
        ]
    if len(text) > MAX_VALUE_CHARS:
        return [
            f"field {field!r} has {len(text)} characters; a value may have at most "
            f"{MAX_VALUE_CHARS} (keep large material such as files in the workspace)"
        ]
    if text == KEEP and not stored:
        return [f"field {field!r} has no stored value to keep; give its value"]
    if secret and text not in (KEEP, "") and len(text.strip()) < MIN_SECRET_CHARS:
        return [
            f"field {field!r} is secret and its value has {len(text.strip())} characters; a "
            f"secret needs at least {MIN_SECRET_CHARS} (a shorter one could not be redacted "
            "from output without redacting ordinary text)"
        ]
    return []


def secret_keys(
    fields: Mapping[str, object], secure_keys: Iterable[str] | None, old: Record | None
) -> set[str]:
    """The secret fields after a save: those named (else the name heuristic), plus every key
    that was secret before."""
    chosen = set(secure_keys) if secure_keys is not None else set(filter(looks_secret, fields))
    return chosen | set(old["secure_keys"] if old else [])


def build(
    engine: str,
    name: str,
    fields: Mapping[str, object],
    secure_keys: Iterable[str] | None = None,
    old: Record | None = None,
) -> Record:
    """The record a save stores; InvalidInputError listing every problem."""
    secure_keys = list(secure_keys) if secure_keys is not None else None
    found = problems(engine, name, fields, secure_keys, old)
    if found:
        raise InvalidInputError(f"cannot save {engine}/{name}: " + "; ".join(found))
    old_fields = old["fields"] if old else {}
    kept: dict[str, str] = {}
    for field, value in fields.items():
        text = str(value)
        if text == KEEP:
            kept[field] = old_fields[field]
        elif text:
            kept[field] = text
    stamp = now()
    return {
        "engine": engine,
        "name": name,
        "created_at": old["created_at"] if old else stamp,
        "updated_at": stamp,
        "fields": kept,
        "secure_keys": sorted(secret_keys(fields, secure_keys, old)),
    }


def masked(record: Record) -> Record:
    """The record with every secret value replaced by :data:`KEEP` (safe to show)."""
    secret = set(record["secure_keys"])
    fields = {f: KEEP if f in secret else v for f, v in record["fields"].items()}
    return {**record, "fields": fields}


def env_of(record: Record) -> dict[str, str]:
    """The variables a pad gets from the record (``_`` fields are never exported)."""
    engine, name = record["engine"], record["name"]
    return {env_name(engine, name, f): v for f, v in record["fields"].items() if exported(f)}


def secrets_of(record: Record) -> list[tuple[str, str]]:
    """(value, variable) of every secret field, for the scrubber."""
    engine, name, secret = record["engine"], record["name"], set(record["secure_keys"])
    return [(v, env_name(engine, name, f)) for f, v in record["fields"].items() if f in secret]


def summary(record: Record) -> Record:
    """What a listing shows of a record: names and times, never a value."""
    fields = record["fields"]
    return {
        "engine": record["engine"],
        "name": record["name"],
        "created_at": record["created_at"],
        "updated_at": record["updated_at"],
        "fields": list(fields),
        "secure_keys": record["secure_keys"],
        "env": list(env_of(record)),
    }


def check_shape(record: object) -> Record:
    """``record`` if it has the shape of a stored record, else ValueError saying what is off."""
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    for key, kind in (("engine", str), ("name", str), ("fields", dict), ("secure_keys", list)):
        if not isinstance(record.get(key), kind):
            raise ValueError(f"{key!r} is missing or not a {kind.__name__}")
    if not all(isinstance(v, str) for v in record["fields"].values()):
        raise ValueError("a field value is not text")
    record.setdefault("created_at", "")
    record.setdefault("updated_at", record["created_at"])
    return record
