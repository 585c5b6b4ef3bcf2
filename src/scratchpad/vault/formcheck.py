"""Checks of credential form specs and patches (pure): every error names its key by path.

A spec comes back as a normalised copy (defaults filled, options as ``{value, label}``, keys
in one order, a ``form_id`` made when absent); a patch keeps its ``null``\\ s, which delete.
Neither may carry a credential value: the person types values into the form, and they never
pass through the model that writes specs and patches.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any, NoReturn
from urllib.parse import urlsplit

from scratchpad.errors import InvalidInputError
from scratchpad.text import clean_text
from scratchpad.vault.lenient import parse_lenient
from scratchpad.vault.names import NAME_RE, NAME_RULE, env_word

FIELD_TYPES = ("text", "password", "url", "select", "textarea", "boolean")
ACTION_KINDS = ("primary", "secondary", "danger", "link")
MAX_TEXT_BYTES = 4096
MAX_URL_CHARS = 2048
MAX_FIELDS = 200  # per list
MAX_METHODS = 50
MAX_OPTIONS = 200
MAX_ACTIONS = 20
MAX_SPEC_BYTES = 256 * 1024  # encoded as JSON
MAX_DEPTH = 16
FORM_ID_RE = re.compile(r"(?!\.+$)[A-Za-z0-9_.-]{1,64}")  # not "." or "..": a URL segment
COLOR_RE = re.compile(r"[A-Za-z0-9#(),.%\s-]{1,64}")  # a colour or var(--name); no url(), ';'
PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
VALUE_KEYS = ("value", "values")
NO_VALUES = (
    "form specs and patches must not carry credential values (the person types them into "
    "the form; they never pass through the model); remove this key"
)

Check = Callable[[Any, str], Any]

# A form's field names: a vault field name that does not start with "_" (those are the
# vault's own, such as the method a connection was saved with).
FIELD_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
FIELD_RULE = (
    "1 to 64 letters, digits, '_', '.' or '-', starting with a letter (names starting with "
    "'_' are the vault's own)"
)


def check_spec(spec: object) -> dict[str, Any]:
    """A normalised deep copy of a valid form spec (text is read leniently first)."""
    found = _load(spec, "form spec")
    _refuse_values(found, "")
    out = _object(found, "", SPEC_RULES, keep_nulls=False)
    for key, hint in (("engine", "e.g. 'postgres' or a name of your own"), ("title", "")):
        if key not in out:
            _fail(key, f"missing; give the form's {key}" + (f", {hint}" if hint else ""))
    out.setdefault("form_id", new_form_id())
    _check_methods(out)
    return _sized(_ordered(out, SPEC_RULES), "form spec")


def check_patch(patch: object) -> dict[str, Any]:
    """A normalised copy of a valid patch; its nulls stay (they delete)."""
    found = _load(patch, "patch")
    _refuse_values(found, "")
    out = _object(found, "", PATCH_RULES, keep_nulls=True)
    if out.get("form_id") is None:
        _fail("form_id", "missing; a patch names the form it changes by its form_id")
    return _sized(_ordered(out, PATCH_RULES), "patch")


def new_form_id() -> str:
    return "fm_" + secrets.token_hex(5)


# --- the pieces ------------------------------------------------------------------------------


def _fail(path: str, problem: str) -> NoReturn:
    raise InvalidInputError(f"{path}: {problem}" if path else problem)


def _join(path: str, key: object) -> str:
    if isinstance(key, str) and PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key!r}]"


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    names = {int: "a number", float: "a number", list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def _load(value: object, what: str) -> dict[str, Any]:
    if isinstance(value, str):
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > MAX_SPEC_BYTES:
            _fail("", f"the {what} is {size // 1024} KiB; the limit is 256 KiB: shorten it")
        value = parse_lenient(value)
    if not isinstance(value, dict):
        _fail("", f"a {what} must be a JSON object, not {_kind(value)}")
    return value


def _sized(value: dict[str, Any], what: str) -> dict[str, Any]:
    size = len(json.dumps(value, ensure_ascii=False).encode())
    if size > MAX_SPEC_BYTES:
        _fail("", f"the {what} is {size // 1024} KiB encoded; the limit is 256 KiB: shorten it")
    return value


def _refuse_values(node: object, path: str, depth: int = 0, option: bool = False) -> None:
    """No ``value``/``values`` key anywhere, except an option's value (a choice offered)."""
    if depth > MAX_DEPTH:
        _fail(path, f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, dict):
        for key, item in node.items():
            where = _join(path, key)
            if key in VALUE_KEYS and not (option and key == "value"):
                _fail(where, NO_VALUES)
            inside = key == "options" and isinstance(item, list)
            for index, child in enumerate(item) if inside else ():
                _refuse_values(child, f"{where}[{index}]", depth + 2, option=True)
            if not inside:
                _refuse_values(item, where, depth + 1)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            _refuse_values(item, f"{path}[{index}]", depth + 1)


def _object(
    value: object, path: str, rules: Mapping[str, Check], *, keep_nulls: bool
) -> dict[str, Any]:
    """``value`` checked key by key; a null is kept (patches) or means absent (specs)."""
    if not isinstance(value, dict):
        _fail(path, f"expected an object, got {_kind(value)}")
    out: dict[str, Any] = {}
    for key, item in value.items():
        rule = rules.get(key)
        if rule is None:
            where = f"{path}: unknown key" if path else "unknown top-level key"
            raise InvalidInputError(f"{where} {key!r}; the keys are {', '.join(rules)}")
        if item is not None:
            out[key] = rule(item, _join(path, key))
        elif keep_nulls:
            out[key] = None
    return out


def _ordered(value: dict[str, Any], rules: Mapping[str, Check]) -> dict[str, Any]:
    return {key: value[key] for key in rules if key in value}


def _list(value: object, path: str, cap: int, what: str) -> list[Any]:
    if not isinstance(value, list):
        _fail(path, f"expected a list of {what}, got {_kind(value)}")
    if len(value) > cap:
        _fail(path, f"{len(value)} {what}; at most {cap} are allowed")
    return value


def _keyed(value: object, path: str, cap: int, what: str) -> dict[Any, Any]:
    if not isinstance(value, dict):
        _fail(
            path,
            f"expected an object keyed by {what} (a list replaces them all), got {_kind(value)}",
        )
    if len(value) > cap:
        _fail(path, f"{len(value)} entries; at most {cap} are allowed")
    return value


def _unique(items: list[dict[str, Any]], key: str, path: str) -> None:
    seen: set[str] = set()
    for index, item in enumerate(items):
        if item[key] in seen:
            _fail(f"{path}[{index}].{key}", f"{item[key]!r} is used twice; give each its own {key}")
        seen.add(item[key])


# --- values ----------------------------------------------------------------------------------


def _text(value: object, path: str) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        _fail(path, f"expected text, got {_kind(value)}")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_TEXT_BYTES:
        _fail(path, f"{size} bytes of text; keep it under {MAX_TEXT_BYTES // 1024} KiB")
    return clean_text(value)


def _filled(value: object, path: str) -> str:
    text = _text(value, path)
    if not text.strip():
        _fail(path, "must not be empty")
    return text


def _bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        _fail(path, f"expected true or false, got {_kind(value)}")
    return value


def _matching(pattern: re.Pattern[str], rule: str) -> Check:
    def check(value: object, path: str) -> str:
        if not isinstance(value, str) or pattern.fullmatch(value) is None:
            _fail(path, f"{_kind(value)} is not allowed; use {rule}")
        return value

    return check


def _one_of(choices: tuple[str, ...]) -> Check:
    def check(value: object, path: str) -> str:
        if value not in choices:
            _fail(path, f"{_kind(value)} is not one of {', '.join(choices)}")
        return str(value)

    return check


def is_http_url(text: str) -> bool:
    """Whether ``text`` is an http(s) URL with a host and no white space."""
    if len(text) > MAX_URL_CHARS or any(char.isspace() for char in text):
        return False
    try:
        parts = urlsplit(text)
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # a malformed IPv6 host or port
        return False


def _url(value: object, path: str) -> str:
    text = _text(value, path)
    if not is_http_url(text):
        _fail(
            path, f"{_kind(value)} is not an http(s) link; give one like https://example.com/help"
        )
    return text


def _logo(value: object, path: str) -> str:
    if not isinstance(value, str) or NAME_RE.fullmatch(value) is None:
        _fail(
            path,
            f"{_kind(value)} is not an icon name; give one such as 'database' or 'key', not a URL",
        )
    return value


def _default(value: object, path: str) -> str | bool:
    return value if isinstance(value, bool) else _text(value, path)


# --- fields, options, methods, actions -------------------------------------------------------


def _option(value: object, path: str) -> dict[str, str]:
    if not isinstance(value, dict):
        text = _text(value, path)
        return {"value": text, "label": text}
    option = _object(value, path, OPTION_RULES, keep_nulls=False)
    if "value" not in option:
        _fail(path, "missing 'value'; an option is {value, label} or plain text")
    return {"value": option["value"], "label": option.get("label", option["value"])}


def _options(value: object, path: str) -> list[dict[str, str]]:
    items = _list(value, path, MAX_OPTIONS, "options")
    if not items:
        _fail(path, "empty; a select field needs at least one option")
    options = [_option(item, f"{path}[{index}]") for index, item in enumerate(items)]
    _unique(options, "value", path)
    return options


def _field(value: object, path: str) -> dict[str, Any]:
    field = _object(value, path, FIELD_RULES, keep_nulls=False)
    if "name" not in field:
        _fail(path, "missing 'name'; give every field a name such as 'api_key'")
    defaults = {"label": field["name"], "type": "text", "required": False, "skipable": True}
    field = _ordered({**defaults, **field}, FIELD_RULES)
    _consistent(field, path)
    return field


def _consistent(field: dict[str, Any], path: str) -> None:
    """Keys that depend on the field's type."""
    kind, default = field["type"], field.get("default")
    if kind == "select" and "options" not in field:
        _fail(f"{path}.options", "missing; a select field needs a non-empty list of options")
    if kind != "select" and "options" in field:
        _fail(f"{path}.options", f"only a select field takes options; this one is {kind}")
    if kind != "boolean" and "checkbox_label" in field:
        _fail(f"{path}.checkbox_label", f"only a boolean field takes one; this one is {kind}")
    if default is None:
        return
    where = f"{path}.default"
    if kind == "password":
        _fail(where, "a password field takes no default (secrets never pass through the model)")
    if (kind == "boolean") != isinstance(default, bool):
        _fail(
            where,
            f"a {kind} field's default must be {'true or false' if kind == 'boolean' else 'text'}",
        )
    if kind == "select" and default not in [option["value"] for option in field["options"]]:
        _fail(where, f"{default!r} is not the value of one of the options")


def _fields(value: object, path: str) -> list[dict[str, Any]]:
    items = _list(value, path, MAX_FIELDS, "fields")
    fields = [_field(item, f"{path}[{index}]") for index, item in enumerate(items)]
    _unique(fields, "name", path)
    return fields


def _method(value: object, path: str) -> dict[str, Any]:
    method = _object(value, path, METHOD_RULES, keep_nulls=False)
    if "id" not in method:
        _fail(path, "missing 'id'; give every method an id such as 'api_key'")
    return _ordered({"label": method["id"], **method}, METHOD_RULES)


def _methods(value: object, path: str) -> list[dict[str, Any]]:
    items = _list(value, path, MAX_METHODS, "methods")
    methods = [_method(item, f"{path}[{index}]") for index, item in enumerate(items)]
    _unique(methods, "id", path)
    return methods


def _action(value: object, path: str) -> dict[str, Any]:
    action = _object(value, path, ACTION_RULES, keep_nulls=False)
    for key in ("id", "label"):
        if key not in action:
            _fail(path, f"missing {key!r}; an action is {{id, label, kind?}}")
    return _ordered(action, ACTION_RULES)


def _actions(value: object, path: str) -> list[dict[str, Any]]:
    items = _list(value, path, MAX_ACTIONS, "actions")
    actions = [_action(item, f"{path}[{index}]") for index, item in enumerate(items)]
    _unique(actions, "id", path)
    return actions


def _check_methods(spec: dict[str, Any]) -> None:
    """What only the whole spec can tell: method names, field names across methods, fields."""
    methods = spec.get("methods", [])
    ids = [method["id"] for method in methods]
    for key in ("selected_method", "auth_method"):
        if key in spec and spec[key] not in ids:
            _fail(key, f"{spec[key]!r} names no method; the methods are {', '.join(ids) or 'none'}")
    top = _variables(spec.get("fields", []), "fields", {})
    for i, method in enumerate(methods):
        _variables(method.get("fields", []), f"methods[{i}].fields", dict(top))
    if not top and not any(method.get("fields") for method in methods):
        _fail("fields", "the form has no fields; give fields, or methods that have fields")


def _variables(fields: list[dict[str, Any]], path: str, taken: dict[str, str]) -> dict[str, str]:
    """Field names by the variable each becomes (``DS_<FIELD>``): two names of one variable
    (``api-key``, ``api_key``; ``Host``, ``host``), here or among ``taken``, are refused."""
    for index, field in enumerate(fields):
        name, word = field["name"], env_word(field["name"])
        if word in taken and taken[word] == name:  # (twice in one list: _unique says so)
            _fail(f"{path}[{index}].name", f"{name!r} is a top-level field already; give it "
                  "another name")  # fmt: skip
        if word in taken:
            _fail(
                f"{path}[{index}].name",
                f"{name!r} and {taken[word]!r} would be the same variable (DS_{word}); give "
                "names that differ in more than case or punctuation",
            )
        taken[word] = name
    return taken


# --- patches ---------------------------------------------------------------------------------


def _patch_fields(value: object, path: str) -> Any:
    if isinstance(value, list):
        return _fields(value, path)
    out: dict[str, Any] = {}
    for name, change in _keyed(value, path, MAX_FIELDS, "field name").items():
        where = _join(path, name)
        if not isinstance(name, str) or FIELD_RE.fullmatch(name) is None:
            _fail(where, f"{name!r} is not a field name; use {FIELD_RULE}")
        out[name] = _partial(change, where, FIELD_RULES, "name", name)
    return out


def _patch_methods(value: object, path: str) -> Any:
    if isinstance(value, list):
        return _methods(value, path)
    out: dict[str, Any] = {}
    for method_id, change in _keyed(value, path, MAX_METHODS, "method id").items():
        where = _join(path, method_id)
        if not isinstance(method_id, str) or NAME_RE.fullmatch(method_id) is None:
            _fail(where, f"{method_id!r} is not a method id; use {NAME_RULE}")
        out[method_id] = _partial(change, where, METHOD_PATCH_RULES, "id", method_id)
    return out


def _partial(
    change: object, path: str, rules: Mapping[str, Check], id_key: str, key: str
) -> dict[str, Any] | None:
    """One keyed entry of a patch: null (remove it) or the keys to change (null deletes)."""
    if change is None:
        return None
    part = _ordered(_object(change, path, rules, keep_nulls=True), rules)
    if id_key in part and part[id_key] != key:
        _fail(
            f"{path}.{id_key}",
            f"{_kind(part[id_key])} differs from its key {key!r}; to rename, remove the old "
            "entry (null) and add the new one",
        )
    return part


# --- the rules, key by key, in the order normalised output keeps ----------------------------

OPTION_RULES: dict[str, Check] = {"value": _text, "label": _text}
FIELD_RULES: dict[str, Check] = {
    "name": _matching(FIELD_RE, FIELD_RULE),
    "label": _filled,
    "type": _one_of(FIELD_TYPES),
    "required": _bool,
    "placeholder": _text,
    "default": _default,
    "options": _options,
    "help": _text,
    "skipable": _bool,
    "checkbox_label": _text,
    "error": _text,
    "warning": _text,
    "status": _text,
}
METHOD_RULES: dict[str, Check] = {
    "id": _matching(NAME_RE, NAME_RULE),
    "label": _filled,
    "description": _text,
    "recommended": _bool,
    "help_url": _url,
    "fields": _fields,
}
METHOD_PATCH_RULES: dict[str, Check] = {**METHOD_RULES, "fields": _patch_fields}
ACTION_RULES: dict[str, Check] = {
    "id": _matching(NAME_RE, NAME_RULE),
    "label": _filled,
    "kind": _one_of(ACTION_KINDS),
}
TOP_RULES: dict[str, Check] = {
    "form_id": _matching(FORM_ID_RE, "1 to 64 letters, digits, '_', '.' or '-', not only dots"),
    "engine": _matching(NAME_RE, NAME_RULE),
    "title": _filled,
    "subtitle": _text,
    "logo": _logo,
    "logo_color": _matching(COLOR_RE, "a CSS colour such as '#336791' or 'var(--accent)'"),
    "help_url": _url,
    "form_warning": _text,
    "form_error": _text,
    "status_text": _text,
    "_is_probing": _bool,
    "_is_success": _bool,
    "selected_method": _matching(NAME_RE, NAME_RULE),
    "auth_method": _matching(NAME_RE, NAME_RULE),
}
SPEC_RULES: dict[str, Check] = {
    **TOP_RULES,
    "fields": _fields,
    "methods": _methods,
    "actions": _actions,
}
PATCH_RULES: dict[str, Check] = {
    **TOP_RULES,
    "fields": _patch_fields,
    "methods": _patch_methods,
    "actions": _actions,
}
