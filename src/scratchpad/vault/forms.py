"""The credential form: its spec, the patch dialect that changes it, and the fenced blocks a
model puts in its reply (pure, no I/O).

A model asks a person for credentials with a form spec; the person fills the form in outside
the chat, so values never pass through the model. Checks live in ``formcheck``, lenient JSON
in ``lenient``; both are re-exported here, the one import for callers.

How :func:`merge_patch` applies a patch (the web UI does the same; both are tested against
``tests/data/form_patch_vectors.json``):

- A patch whose ``form_id`` differs from the form's replaces the form: the result is the
  patch applied to an empty form (null keys dropped, ``fields``/``methods`` objects turned
  into lists in their order). A patch without ``form_id`` is applied to the form.
- Top level: a value overwrites the key, ``null`` deletes it. Only ``fields`` and ``methods``
  (and a method's ``fields``) merge; every other value (``actions``, ``options``) is replaced
  whole.
- ``fields`` as an object keyed by name: an object merges into the field of that name (its
  ``null`` properties are deleted); ``null`` removes the field; an unknown name appends a new
  field at the end, named by its key (its null properties dropped, no defaults filled). Order
  is kept; only the first field of a name is touched. ``methods`` keyed by id likewise, and a
  method's ``fields`` by the same rules.
- A keyed object on a form without that list starts from an empty list (so the form gains
  the list, possibly empty); removing every entry leaves an empty list. ``fields`` or
  ``methods`` given as a list replaces the list whole; ``null`` deletes it.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

from scratchpad.errors import InvalidInputError
from scratchpad.vault.formcheck import FIELD_TYPES, check_patch, check_spec
from scratchpad.vault.lenient import parse_lenient
from scratchpad.vault.names import looks_secret

__all__ = [
    "FIELD_TYPES",
    "FORM_BLOCK",
    "PATCH_BLOCK",
    "check_patch",
    "check_spec",
    "fields_of",
    "find_blocks",
    "form_block",
    "is_secret_field",
    "merge_patch",
    "method_of",
    "parse_lenient",
    "patch_block",
]

FORM_BLOCK = "data-vault-form"
PATCH_BLOCK = "data-vault-form-patch"
SECRET_TYPES = ("password", "textarea")
WIDTH = 100  # a container whose JSON fits this many characters stays on one line

# list key -> (the key naming an entry, the keyed lists inside an entry)
Keyed = Mapping[str, tuple[str, Mapping[str, Any]]]
METHOD_KEYED: Keyed = {"fields": ("name", {})}
FORM_KEYED: Keyed = {"fields": ("name", {}), "methods": ("id", METHOD_KEYED)}

OPEN_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^`]*")


def merge_patch(form: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """The form as ``patch`` leaves it: a new dict, both inputs untouched."""
    if not isinstance(form, dict) or not isinstance(patch, dict):
        raise InvalidInputError("merge_patch takes a form and a patch, both JSON objects")
    same = patch.get("form_id", form.get("form_id")) == form.get("form_id")
    return _merge_object(copy.deepcopy(form) if same else {}, patch, FORM_KEYED, "")


def _merge_object(
    base: dict[str, Any], change: dict[str, Any], keyed: Keyed, path: str
) -> dict[str, Any]:
    """``change`` applied to ``base`` (a copy the caller owns)."""
    for key, value in change.items():
        if value is None:
            base.pop(key, None)
        elif key in keyed and isinstance(value, dict):
            base[key] = _merge_list(base.get(key), value, keyed[key], f"{path}{key}")
        else:
            base[key] = copy.deepcopy(value)
    return base


def _merge_list(
    items: object, change: dict[str, Any], rule: tuple[str, Mapping[str, Any]], path: str
) -> list[Any]:
    """A list of named entries with a keyed patch applied: merge, remove (null), append."""
    id_key, inner = rule
    result = copy.deepcopy(items) if isinstance(items, list) else []
    for key, entry in change.items():
        index = next(
            (
                i
                for i, item in enumerate(result)
                if isinstance(item, dict) and item.get(id_key) == key
            ),
            None,
        )
        if entry is None:
            if index is not None:
                del result[index]
            continue
        if not isinstance(entry, dict):
            raise InvalidInputError(f"{path}.{key}: expected an object or null; check the patch")
        merged = _merge_object({id_key: key} if index is None else result[index], entry, inner, "")
        merged[id_key] = key
        if index is None:
            result.append(merged)
        else:
            result[index] = merged
    return result


# --- blocks ----------------------------------------------------------------------------------


def form_block(spec: dict[str, Any]) -> str:
    """The fenced ``data-vault-form`` block of a (checked) spec, to put verbatim in a reply."""
    return _fence(FORM_BLOCK, check_spec(spec))


def patch_block(patch: dict[str, Any]) -> str:
    """The fenced ``data-vault-form-patch`` block of a (checked) patch."""
    return _fence(PATCH_BLOCK, check_patch(patch))


def _fence(language: str, value: dict[str, Any]) -> str:
    # A backtick only occurs inside JSON strings, where \u0060 means the same and cannot
    # close the fence early.
    body = _dumps(value, 0).replace("`", "\\u0060")
    return f"```{language}\n{body}\n```"


def _dumps(value: Any, indent: int) -> str:
    """Compact JSON: the top spread over lines, and below it any container that holds
    containers and is too wide to fit on one line (so a plain field takes one line)."""
    flat = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    if not isinstance(value, (dict, list)) or not value:
        return flat
    inner = value.values() if isinstance(value, dict) else value
    leaf = not any(isinstance(item, (dict, list)) for item in inner)
    if indent and (leaf or len(flat) + indent <= WIDTH):
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        lines = [
            f"{pad}{json.dumps(key, ensure_ascii=False)}: {_dumps(item, indent + 2)}"
            for key, item in value.items()
        ]
        return "{\n" + ",\n".join(lines) + "\n" + " " * indent + "}"
    lines = [pad + _dumps(item, indent + 2) for item in value]
    return "[\n" + ",\n".join(lines) + "\n" + " " * indent + "]"


def find_blocks(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Every form and patch block of a reply, in order, parsed leniently; a block that does
    not read as a JSON object, or is never closed, is skipped."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    found: list[tuple[str, dict[str, Any]]] = []
    index = 0
    while index < len(lines):
        opening = OPEN_FENCE.fullmatch(lines[index])
        if opening is None:
            index += 1
            continue
        close = _closing(lines, index + 1, opening.group(1))
        if close is None:
            break  # everything after an unclosed fence is inside it
        language = opening.group(2).lower()
        if language in (FORM_BLOCK, PATCH_BLOCK):
            parsed = _parsed("\n".join(lines[index + 1 : close]))
            if parsed is not None:
                found.append((language, parsed))
        index = close + 1
    return found


def _closing(lines: list[str], start: int, fence: str) -> int | None:
    closing = re.compile(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*")
    return next((i for i in range(start, len(lines)) if closing.fullmatch(lines[i])), None)


def _parsed(body: str) -> dict[str, Any] | None:
    try:
        value = parse_lenient(body)
    except InvalidInputError:
        return None
    return value if isinstance(value, dict) else None


# --- reading a spec --------------------------------------------------------------------------


def method_of(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The method chosen: ``auth_method``, else ``selected_method``, else the only one."""
    methods = [m for m in spec.get("methods") or [] if isinstance(m, dict)]
    for key in ("auth_method", "selected_method"):
        chosen = spec.get(key)
        match = next((m for m in methods if chosen is not None and m.get("id") == chosen), None)
        if match is not None:
            return match
    return methods[0] if len(methods) == 1 else None


def fields_of(spec: dict[str, Any], method_id: str | None = None) -> list[dict[str, Any]]:
    """The fields a submission has: the top-level ones, then the method's (``method_id``, else
    the chosen one). Copies, so callers may change them."""
    fields = list(spec.get("fields") or [])
    if method_id is None:
        method = method_of(spec)
    else:
        methods = [m for m in spec.get("methods") or [] if isinstance(m, dict)]
        method = next((m for m in methods if m.get("id") == method_id), None)
        if method is None:
            known = ", ".join(str(m.get("id")) for m in methods) or "none"
            raise InvalidInputError(f"no method {method_id!r} in this form; its methods: {known}")
    if method is not None:
        fields += method.get("fields") or []
    return copy.deepcopy([field for field in fields if isinstance(field, dict)])


def is_secret_field(field: dict[str, Any]) -> bool:
    """Whether a field's value is a secret: its type hides it, or its name says so."""
    return field.get("type") in SECRET_TYPES or looks_secret(str(field.get("name", "")))
