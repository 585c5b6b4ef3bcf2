"""The conversation model's credential tools: ``request_credentials`` and ``update_form``.

The model describes a form; the tool checks it and gives back a fenced block for the model to
put verbatim in its reply, where the UI shows it as a form in a side panel. The person's
values go from that form to the server, never through the model: neither tool takes a value,
and there is deliberately no tool to read a submission (the model learns only field names and
a submission id).
"""

from __future__ import annotations

from typing import Any

from scratchpad.errors import InvalidInputError
from scratchpad.tools.base import ToolDef, ToolOutcome
from scratchpad.vault.engines import ENGINES, get_engine
from scratchpad.vault.formcheck import ACTION_KINDS
from scratchpad.vault.forms import (
    FIELD_TYPES,
    check_patch,
    check_spec,
    form_block,
    parse_lenient,
    patch_block,
)
from scratchpad.vault.names import env_word, exported

REQUEST_NAME = "request_credentials"
UPDATE_NAME = "update_form"
NESTED = ("fields", "methods", "actions")  # some models send these as JSON text

FIELD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Like a variable: 'api_key', 'host'."},
        "label": {"type": "string", "description": "What the person reads (default: name)."},
        "type": {
            "type": "string",
            "enum": list(FIELD_TYPES),
            "description": "password for any secret; textarea for a multi-line one (a JSON "
            "key); select needs options; boolean is a checkbox. Default text.",
        },
        "required": {"type": "boolean"},
        "placeholder": {"type": "string"},
        "default": {
            "type": ["string", "boolean"],
            "description": "A pre-filled non-secret value (a port, a region).",
        },
        "options": {
            "type": "array",
            "description": "For select: the choices.",
            "items": {
                "type": "object",
                "properties": {"value": {"type": "string"}, "label": {"type": "string"}},
                "required": ["value"],
            },
        },
        "help": {"type": "string", "description": "Where to find it, what it looks like."},
        "skipable": {"type": "boolean", "description": "Whether it may be skipped (true)."},
        "checkbox_label": {"type": "string", "description": "For boolean: the box's text."},
    },
    "required": ["name"],
}
FIELDS_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "array", "items": FIELD_SCHEMA}, {"type": "string"}],
    "description": "The fields every method shares (or the only ones): a list of objects.",
}
METHOD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "E.g. 'app_password'."},
        "label": {"type": "string"},
        "description": {"type": "string", "description": "When to pick this way."},
        "recommended": {"type": "boolean"},
        "help_url": {"type": "string", "description": "An http(s) how-to link."},
        "fields": {"type": "array", "items": FIELD_SCHEMA},
    },
    "required": ["id", "fields"],
}
ACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "label": {"type": "string"},
        "kind": {"type": "string", "enum": list(ACTION_KINDS)},
    },
    "required": ["id", "label"],
}
TEXT = {"type": "string"}
TOP_PROPERTIES: dict[str, Any] = {
    "engine": {
        "type": "string",
        "description": f"The service: a known engine ({', '.join(ENGINES)}) or a name of your "
        "own such as 'posthog'.",
    },
    "title": {"type": "string", "description": "E.g. 'Connect to PostHog'."},
    "subtitle": {"type": "string", "description": "One line: what access is asked for."},
    "logo": {"type": "string", "description": "An icon name ('database', 'key'), not a URL."},
    "logo_color": {"type": "string", "description": "A CSS colour, e.g. '#336791'."},
    "help_url": {"type": "string", "description": "An http(s) link: where to get these."},
    "form_warning": {"type": "string", "description": "An amber banner."},
    "form_error": {"type": "string", "description": "A red banner."},
    "selected_method": {"type": "string", "description": "The method picked in advance."},
    "actions": {
        "anyOf": [{"type": "array", "items": ACTION_SCHEMA}, {"type": "string"}],
        "description": "Buttons (default: Submit and Cancel).",
    },
    "form_id": {"type": "string", "description": "Optional; made for you when absent."},
}
REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **TOP_PROPERTIES,
        "fields": FIELDS_SCHEMA,
        "methods": {
            "anyOf": [{"type": "array", "items": METHOD_SCHEMA}, {"type": "string"}],
            "description": "Several ways to sign in (the person picks one): each has its own "
            "fields.",
        },
    },
    "required": ["engine", "title"],
}
KEYED = "An object keyed by {what}: an object changes those keys (null deletes one), null "
KEYED += "removes the {entry}, a new key adds one; a list replaces them all."
UPDATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "form_id": {"type": "string", "description": "The form_id of the form to change."},
        **{key: value for key, value in TOP_PROPERTIES.items() if key != "form_id"},
        "status_text": {"type": "string", "description": "A live status line; null clears."},
        "fields": {
            "anyOf": [{"type": "object"}, {"type": "array", "items": {"type": "object"}}],
            "description": KEYED.format(what="field name", entry="field")
            + " A field's error, warning and status are texts shown under it.",
        },
        "methods": {
            "anyOf": [{"type": "object"}, {"type": "array", "items": {"type": "object"}}],
            "description": KEYED.format(what="method id", entry="method")
            + " A method's fields follow the same rules.",
        },
    },
    "required": ["form_id"],
}

REQUEST_DESCRIPTION = (
    "Ask the person for credentials (database passwords, API keys, tokens, service accounts) "
    "through a form shown beside the chat. Use it whenever a task needs credentials that pads "
    "do not have yet; never ask the person to paste a secret into the chat. Describe the form: "
    "engine, title, fields (type password for secrets), or methods when there are several ways "
    "to sign in. For a known engine you may leave out fields to get its standard form. The "
    "person fills it in; the connection is tested and, when it works, saved, and pads get it "
    "as DS_<ENGINE>_<NAME>__<FIELD> variables. You never see the values. The result is a block "
    "to put verbatim in your reply."
)
UPDATE_DESCRIPTION = (
    "Change a credential form already shown, by its form_id: a field's error, warning, help or "
    "status text, fields or methods added or removed, the subtitle, banners or status line. "
    'E.g. {"form_id": "fm_…", "fields": {"api_key": {"error": "Key refused"}, "region": '
    "null}}. A patch never carries a value. The result is a block to put verbatim in your reply."
)
PROMPT = (
    "Never ask the person to type or paste a password, API key, token or other secret into the "
    "chat, and never repeat one they paste. When a task needs credentials, call "
    "request_credentials: the person fills in a form outside the chat and you only learn field "
    "names and a submission id; saved connections reach pads as DS_* variables."
)


def request_credentials_tool() -> ToolDef:
    return ToolDef(
        REQUEST_NAME, REQUEST_DESCRIPTION, REQUEST_SCHEMA, handle_request_credentials, PROMPT
    )


def update_form_tool() -> ToolDef:
    return ToolDef(UPDATE_NAME, UPDATE_DESCRIPTION, UPDATE_SCHEMA, handle_update_form)


def checked_request(tool_input: dict[str, Any]) -> dict[str, Any]:
    """The form a request_credentials call describes, checked and normalised (nested JSON text
    read back, a known engine's fields when none are given); InvalidInputError if it is not
    one. Shared with the MCP edge, so both check a form the same way."""
    return check_spec(_known_fields(_unnested(tool_input)))


def variables_hint(spec: dict[str, Any]) -> str:
    """The ``DS_*`` variables a saved connection of ``spec`` gives pads (``<NAME>`` open)."""
    prefix = f"DS_{env_word(spec['engine'])}_<NAME>__"
    return ", ".join(prefix + env_word(name) for name in _field_names(spec))


async def handle_request_credentials(context: object, tool_input: dict[str, Any]) -> ToolOutcome:
    try:
        spec = checked_request(tool_input)
    except InvalidInputError as exc:
        return _refused("The form was not shown", exc, REQUEST_NAME)
    return ToolOutcome(_form_reply(spec))


async def handle_update_form(context: object, tool_input: dict[str, Any]) -> ToolOutcome:
    try:
        block = patch_block(check_patch(_unnested(tool_input)))
    except InvalidInputError as exc:
        return _refused("The form was not changed", exc, UPDATE_NAME)
    return ToolOutcome(
        "Put this block in your reply exactly as it is (it changes the form beside the chat "
        f"and is not shown as text):\n\n{block}"
    )


def _refused(what: str, error: InvalidInputError, tool: str) -> ToolOutcome:
    return ToolOutcome(
        f"{what}: {error}. Fix it and call {tool} again.", ok=False, reason="invalid_form"
    )


def _unnested(tool_input: dict[str, Any]) -> dict[str, Any]:
    """The input with ``fields``/``methods``/``actions`` sent as JSON text read back."""
    spec = dict(tool_input)
    for key in NESTED:
        if isinstance(spec.get(key), str):
            try:
                spec[key] = parse_lenient(spec[key])
            except InvalidInputError as exc:
                raise InvalidInputError(f"{key}: {exc}") from None
    methods = spec.get("methods")
    if isinstance(methods, list):
        spec["methods"] = [
            _unnested_fields(method, f"methods[{i}]") for i, method in enumerate(methods)
        ]
    return spec


def _unnested_fields(method: object, path: str) -> object:
    if not isinstance(method, dict) or not isinstance(method.get("fields"), str):
        return method
    try:
        return {**method, "fields": parse_lenient(method["fields"])}
    except InvalidInputError as exc:
        raise InvalidInputError(f"{path}.fields: {exc}") from None


def _known_fields(spec: dict[str, Any]) -> dict[str, Any]:
    """A known engine's standard fields (and logo, link) when the spec gives none."""
    engine = get_engine(spec["engine"]) if isinstance(spec.get("engine"), str) else None
    if engine is None or spec.get("fields") or spec.get("methods"):
        return spec
    defaults = {"logo": engine.logo, "help_url": engine.help_url}
    given = {key: value for key, value in spec.items() if value is not None}
    return {**defaults, **given, "fields": [dict(field) for field in engine.fields]}


def _form_reply(spec: dict[str, Any]) -> str:
    variables = variables_hint(spec)
    methods = "; a method's fields only when it is the one chosen" if spec.get("methods") else ""
    return (
        "Put this block in your reply exactly as it is (it shows the form beside the chat and "
        f"is not shown as text):\n\n{form_block(spec)}\n\n"
        "The person fills in the form in a side panel; you never see the values, only the "
        "field names and a submission id, so do not ask for them in the chat. Once the "
        f"connection has been tested and saved, pads get the variables {variables} (<NAME> is "
        f"the saved connection's name{methods}). Read them from os.environ in a pad and never "
        "print them."
    )


def _field_names(spec: dict[str, Any]) -> list[str]:
    """Every field a submission may have (top-level, then each method's), once each."""
    fields = [*spec.get("fields", [])]
    for method in spec.get("methods", []):
        fields += method.get("fields", [])
    return [name for name in dict.fromkeys(f["name"] for f in fields) if exported(name)]
