"""The credential form: merge vectors, spec and patch checks, lenient JSON, blocks."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpad.errors import InvalidInputError
from scratchpad.vault.forms import (
    FIELD_TYPES,
    FORM_BLOCK,
    PATCH_BLOCK,
    check_patch,
    check_spec,
    fields_of,
    find_blocks,
    form_block,
    is_secret_field,
    merge_patch,
    method_of,
    parse_lenient,
    patch_block,
)

VECTORS = json.loads(
    (Path(__file__).parent.parent / "data" / "form_patch_vectors.json").read_text("utf-8")
)
CASES = VECTORS["cases"]


def spec(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "engine": "postgres",
        "title": "Connect to PostgreSQL",
        "fields": [
            {"name": "host", "label": "Host", "required": True},
            {"name": "port", "default": "5432"},
            {"name": "password", "type": "password"},
        ],
    }
    base.update(changes)
    return base


MAILBOX: dict[str, Any] = {
    "engine": "mailbox",
    "title": "Connect a mailbox",
    "methods": [
        {
            "id": "app_password",
            "label": "App password",
            "fields": [{"name": "email"}, {"name": "app_password", "type": "password"}],
        },
        {"id": "service_account", "fields": [{"name": "key_json", "type": "textarea"}]},
    ],
}


# --- the shared vectors ---------------------------------------------------------------------


def test_the_vectors_are_many_and_named_once() -> None:
    names = [case["name"] for case in CASES]
    assert len(names) >= 36
    assert len(set(names)) == len(names)
    assert VECTORS["description"]


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_merge_vector(case: dict[str, Any]) -> None:
    form, patch = copy.deepcopy(case["form"]), copy.deepcopy(case["patch"])
    result = merge_patch(form, patch)
    assert result == case["expected"]
    assert form == case["form"] and patch == case["patch"]  # inputs untouched
    assert result is not form
    assert check_patch(patch)["form_id"] == patch["form_id"]  # every vector patch is valid


def test_merge_result_shares_nothing_with_its_inputs() -> None:
    form = check_spec(MAILBOX)
    patch = {"form_id": form["form_id"], "actions": [{"id": "ok", "label": "OK"}]}
    result = merge_patch(form, patch)
    result["methods"][0]["fields"][0]["label"] = "changed"
    result["actions"][0]["label"] = "changed"
    assert form["methods"][0]["fields"][0]["label"] == "email"
    assert patch["actions"][0]["label"] == "OK"


def test_merge_refuses_what_is_not_an_object() -> None:
    with pytest.raises(InvalidInputError, match="both JSON objects"):
        merge_patch({"form_id": "a"}, [])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"fields\.host: expected an object or null"):
        merge_patch({"form_id": "a"}, {"form_id": "a", "fields": {"host": "x"}})


Strategy = st.SearchStrategy[Any]


def objects(required: dict[str, Strategy], optional: dict[str, Strategy]) -> Strategy:
    return st.fixed_dictionaries(required, optional=optional)


NAMES: Strategy = st.sampled_from(["host", "port", "user", "api_key", "region"])
TEXTS: Strategy = st.text(max_size=8)
FIELD_PATCH: Strategy = st.none() | st.dictionaries(
    st.sampled_from(["label", "error", "status", "required", "help"]),
    st.none() | TEXTS | st.booleans(),
    max_size=3,
)
FIELDS: Strategy = st.lists(
    objects({"name": NAMES}, {"label": TEXTS, "error": TEXTS}),
    max_size=4,
    unique_by=lambda field: str(field["name"]),
)
METHODS: Strategy = st.lists(
    objects({"id": NAMES}, {"fields": FIELDS}),
    max_size=3,
    unique_by=lambda method: str(method["id"]),
)
FORMS = objects(
    {"form_id": st.just("fm_1"), "engine": st.just("pg"), "title": TEXTS},
    {"fields": FIELDS, "subtitle": TEXTS, "methods": METHODS},
)
METHOD_PATCH = st.none() | objects(
    {}, {"label": st.none() | TEXTS, "fields": st.dictionaries(NAMES, FIELD_PATCH)}
)
PATCHES = objects(
    {"form_id": st.sampled_from(["fm_1", "fm_2"])},
    {
        "subtitle": st.none() | TEXTS,
        "title": st.none() | TEXTS,
        "fields": st.none() | st.dictionaries(NAMES, FIELD_PATCH, max_size=4),
        "methods": st.none() | st.dictionaries(NAMES, METHOD_PATCH, max_size=3),
    },
)


@given(FORMS, PATCHES)
@settings(max_examples=300)
def test_merge_never_mutates_and_drops_nulls(form: dict[str, Any], patch: dict[str, Any]) -> None:
    before_form, before_patch = copy.deepcopy(form), copy.deepcopy(patch)
    result = merge_patch(form, patch)
    assert form == before_form and patch == before_patch
    assert result["form_id"] == patch["form_id"]
    assert all(value is not None for value in result.values())
    for key in ("fields", "methods"):
        assert key not in result or isinstance(result[key], list)


@given(FORMS)
def test_merging_the_form_id_alone_is_the_identity(form: dict[str, Any]) -> None:
    assert merge_patch(form, {"form_id": form["form_id"]}) == form


# --- check_spec --------------------------------------------------------------------------------


def test_check_spec_normalises_a_copy() -> None:
    given_spec = spec(
        fields=[
            {"name": "host", "required": True},
            {"name": "mode", "type": "select", "options": ["a", {"value": "b", "label": "B"}]},
            {"name": "port", "default": 5432},
        ]
    )
    before = copy.deepcopy(given_spec)
    checked = check_spec(given_spec)
    assert given_spec == before
    assert re.fullmatch(r"fm_[0-9a-f]{10}", checked["form_id"])
    assert list(checked)[:3] == ["form_id", "engine", "title"]
    host, mode, port = checked["fields"]
    assert host == {
        "name": "host",
        "label": "host",
        "type": "text",
        "required": True,
        "skipable": True,
    }
    assert mode["options"] == [{"value": "a", "label": "a"}, {"value": "b", "label": "B"}]
    assert port["default"] == "5432"
    assert check_spec(checked) == checked  # idempotent: the id is kept, defaults stay
    checked["fields"][0]["label"] = "changed"
    assert "label" not in given_spec["fields"][0]


def test_check_spec_keeps_a_given_form_id_and_drops_nulls() -> None:
    checked = check_spec(spec(form_id="fm_mail_01", form_warning=None, subtitle="Read only"))
    assert checked["form_id"] == "fm_mail_01"
    assert "form_warning" not in checked and checked["subtitle"] == "Read only"


def test_check_spec_takes_text_models_write() -> None:
    text = """{
      // the form
      “engine”: “posthog”, 'title': 'Connect PostHog',
      fields: [{name: 'api_key', type: 'password', required: True,},],
    }"""
    checked = check_spec(text)
    assert checked["engine"] == "posthog"
    assert checked["fields"][0]["required"] is True


def test_check_spec_takes_methods_and_state_keys() -> None:
    checked = check_spec(
        {**MAILBOX, "selected_method": "app_password", "auth_method": "service_account"}
        | {"_is_probing": True, "status_text": "Connecting…", "logo": "mail"}
        | {"actions": [{"id": "submit", "label": "Connect", "kind": "primary"}]}
    )
    assert checked["methods"][1]["label"] == "service_account"
    assert checked["auth_method"] == "service_account"


LONG = "x" * 5000
BAD_SPECS: list[tuple[dict[str, Any] | str | list[Any], str]] = [
    ({"title": "T", "fields": [{"name": "a"}]}, "engine: missing"),
    (spec(engine="my db"), "engine: 'my db' is not allowed"),
    (spec(title="  "), "title: must not be empty"),
    ({"engine": "pg", "fields": [{"name": "a"}]}, "title: missing"),
    (spec(form_id="a/b"), "form_id: 'a/b' is not allowed"),
    (spec(logo="https://x.org/i.png"), "logo: 'https://x.org/i.png' is not an icon name"),
    (spec(logo_color="red; background: url(x)"), "logo_color:"),
    (spec(help_url="javascript:alert(1)"), "help_url: 'javascript:alert(1)' is not an http(s)"),
    (spec(help_url="https://exa mple.com"), "help_url:"),
    (spec(subtitle=LONG), "subtitle: 5000 bytes of text"),
    (spec(subtitle=["a"]), "subtitle: expected text, got a list"),
    (spec(colour="red"), "unknown top-level key 'colour'"),
    (
        spec(fields=[{"name": "a"}, {"name": "b"}, {"name": "c", "type": "number"}]),
        "fields[2].type: 'number' is not one of text, password, url, select, textarea, boolean",
    ),
    (spec(fields=[{"label": "Host"}]), "fields[0]: missing 'name'"),
    (spec(fields=[{"name": "1st"}]), "fields[0].name: '1st' is not allowed"),
    (spec(fields=[{"name": "a"}, {"name": "a"}]), "fields[1].name: 'a' is used twice"),
    (spec(fields=[{"name": "a", "required": "yes"}]), "fields[0].required: expected true or false"),
    (spec(fields=[{"name": "a", "type": "select"}]), "fields[0].options: missing"),
    (spec(fields=[{"name": "a", "type": "select", "options": []}]), "fields[0].options: empty"),
    (spec(fields=[{"name": "a", "options": ["x"]}]), "fields[0].options: only a select field"),
    (
        spec(fields=[{"name": "a", "type": "select", "options": ["x", "x"]}]),
        "fields[0].options[1].value: 'x' is used twice",
    ),
    (
        spec(fields=[{"name": "a", "type": "select", "options": [{"label": "X"}]}]),
        "fields[0].options[0]: missing 'value'",
    ),
    (
        spec(fields=[{"name": "a", "type": "select", "options": ["x"], "default": "y"}]),
        "fields[0].default: 'y' is not the value of one of the options",
    ),
    (spec(fields=[{"name": "a", "type": "password", "default": "hunter2"}]), "fields[0].default"),
    (spec(fields=[{"name": "a", "type": "boolean", "default": "yes"}]), "fields[0].default"),
    (spec(fields=[{"name": "a", "default": True}]), "fields[0].default: a text field's"),
    (spec(fields=[{"name": "a", "checkbox_label": "On"}]), "fields[0].checkbox_label"),
    (spec(fields=[{"name": "a", "value": "secret"}]), "fields[0].value: form specs and patches"),
    (spec(fields="host"), "fields: expected a list of fields, got 'host'"),
    (spec(fields=[]), "fields: the form has no fields"),
    (spec(fields=[{"name": f"f{i}"} for i in range(201)]), "fields: 201 fields; at most 200"),
    (
        spec(fields=[{"name": f"f{i}", "help": "h" * 4000} for i in range(100)]),
        "the limit is 256 KiB",
    ),
    (
        {**MAILBOX, "methods": [{"id": "a", "fields": [{"name": "x"}, {"name": "y", "vaule": 1}]}]},
        "methods[0].fields[1]: unknown key 'vaule'; the keys are name, label, type",
    ),
    ({**MAILBOX, "methods": [{"label": "A"}]}, "methods[0]: missing 'id'"),
    ({**MAILBOX, "methods": [{"id": "a", "fields": [{"name": "x"}]}] * 2}, "methods[1].id"),
    ({**MAILBOX, "methods": [{"id": "a"}] * 51}, "methods: 51 methods; at most 50"),
    ({**MAILBOX, "selected_method": "oauth"}, "selected_method: 'oauth' names no method"),
    (spec(auth_method="oauth"), "auth_method: 'oauth' names no method; the methods are none"),
    (
        {**MAILBOX, "fields": [{"name": "email"}]},
        "methods[0].fields[0].name: 'email' is a top-level field already",
    ),
    ({**MAILBOX, "methods": [{"id": "a", "fields": []}]}, "fields: the form has no fields"),
    (spec(actions=[{"id": "go", "label": "Go", "kind": "loud"}]), "actions[0].kind: 'loud'"),
    (spec(actions=[{"id": "go"}]), "actions[0]: missing 'label'"),
    (spec(_is_probing="no"), "_is_probing: expected true or false"),
    ([], "a form spec must be a JSON object, not a list"),
    ('{"engine": "pg",\n "title": }', "line 2, column 11"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_SPECS, ids=[m for _, m in BAD_SPECS])
def test_check_spec_names_the_bad_key(bad: Any, message: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        check_spec(bad)
    assert message in str(caught.value)


def test_a_spec_too_large_as_text_is_refused_before_parsing() -> None:
    with pytest.raises(InvalidInputError, match="the limit is 256 KiB"):
        check_spec(" " * (257 * 1024) + "{}")


def test_check_spec_replaces_lone_surrogates() -> None:
    checked = check_spec(spec(subtitle="bad \ud800 text"))
    assert checked["subtitle"] == "bad \ufffd text"


# --- check_patch -------------------------------------------------------------------------------


def test_check_patch_keeps_nulls_and_partial_entries() -> None:
    patch = {
        "fields": {
            "api_key": {"error": "Key refused by the server", "status": None},
            "region": None,
        },
        "status_text": None,
        "form_id": "fm_5be01c7d92",
        "methods": {"app": {"fields": {"pw": {"warning": "Old"}}}, "old": None},
    }
    checked = check_patch(patch)
    assert next(iter(checked)) == "form_id"
    assert checked["fields"] == {
        "api_key": {"error": "Key refused by the server", "status": None},
        "region": None,
    }
    assert checked["status_text"] is None
    assert checked["methods"] == {"app": {"fields": {"pw": {"warning": "Old"}}}, "old": None}


def test_check_patch_takes_lists_that_replace_and_text() -> None:
    checked = check_patch("{form_id: 'fm_1', fields: [{name: 'token', type: 'password'}]}")
    assert checked["fields"] == [
        {"name": "token", "label": "token", "type": "password", "required": False, "skipable": True}
    ]


def test_a_patch_may_offer_select_options() -> None:
    checked = check_patch(
        {"form_id": "f", "fields": {"mode": {"options": [{"value": "a", "label": "A"}, "b"]}}}
    )
    assert checked["fields"]["mode"]["options"][1] == {"value": "b", "label": "b"}


BAD_PATCHES: list[tuple[Any, str]] = [
    ({"subtitle": "x"}, "form_id: missing"),
    ({"form_id": None}, "form_id: missing"),
    ({"form_id": "f", "fields": {"api_key": {"value": "sk-1"}}}, "fields.api_key.value: form"),
    ({"form_id": "f", "values": {"api_key": "sk-1"}}, "values: form specs and patches must not"),
    (
        {"form_id": "f", "methods": {"m": {"fields": {"pw": {"value": "x"}}}}},
        "methods.m.fields.pw.value: form specs and patches must not carry credential values",
    ),
    ({"form_id": "f", "actions": [{"id": "a", "label": "A", "value": "x"}]}, "actions[0].value"),
    ({"form_id": "f", "extra": {"deep": [{"value": 1}]}}, "extra.deep[0].value: form specs"),
    (
        {"form_id": "f", "fields": {"api_key": {"vaule": "x"}}},
        "fields.api_key: unknown key 'vaule'",
    ),
    (
        {"form_id": "f", "methods": {"m": {"fields": {"pw": {"colour": 1}}}}},
        "methods.m.fields.pw: unknown key 'colour'",
    ),
    ({"form_id": "f", "methods": {"m": {"kind": 1}}}, "methods.m: unknown key 'kind'"),
    ({"form_id": "f", "colour": "red"}, "unknown top-level key 'colour'"),
    ({"form_id": "f", "fields": {"1x": None}}, "fields['1x']: '1x' is not a field name"),
    ({"form_id": "f", "fields": {"a": {"name": "b"}}}, "fields.a.name: 'b' differs from its key"),
    ({"form_id": "f", "fields": {"a": {"type": "number"}}}, "fields.a.type: 'number' is not one"),
    ({"form_id": "f", "fields": {"a": "text"}}, "fields.a: expected an object, got 'text'"),
    ({"form_id": "f", "fields": "a"}, "fields: expected an object keyed by field name"),
    ({"form_id": "f", "methods": {"bad id": {}}}, "methods['bad id']: 'bad id' is not a method id"),
    ({"form_id": "f", "methods": {"m": {"id": "n"}}}, "methods.m.id: 'n' differs"),
    ({"form_id": "f", "title": ""}, "title: must not be empty"),
    ({"form_id": "f", "help_url": "ftp://x.org"}, "help_url: 'ftp://x.org' is not an http(s)"),
    ("[1, 2]", "a patch must be a JSON object, not a list"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_PATCHES, ids=[m for _, m in BAD_PATCHES])
def test_check_patch_names_the_bad_key(bad: Any, message: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        check_patch(bad)
    assert message in str(caught.value)


# --- parse_lenient -----------------------------------------------------------------------------

LENIENT: list[tuple[str, Any]] = [
    ("{“a”: “b”}", {"a": "b"}),
    ("{‘a’: ‘b’}", {"a": "b"}),
    ("{'a': 'b'}", {"a": "b"}),
    ('{"a": 1, // one\n"b": 2}', {"a": 1, "b": 2}),
    ('{"a": /* inline */ 1}', {"a": 1}),
    ('{"a": [1, 2,], "b": {"c": 3,},}', {"a": [1, 2], "b": {"c": 3}}),
    ('{"a": [1, 2, // last\n]}', {"a": [1, 2]}),
    ('{"a": True, "b": False, "c": None}', {"a": True, "b": False, "c": None}),
    ("{name: 'host', required: true}", {"name": "host", "required": True}),
    ("{'it': 'it\\'s'}", {"it": "it's"}),
    ("{‘a’: ‘don’t’}", {"a": "don’t"}),
    ("{'q': 'say \"hi\"'}", {"q": 'say "hi"'}),
    ("\ufeff[1]", [1]),
]


@pytest.mark.parametrize(("text", "expected"), LENIENT, ids=[t for t, _ in LENIENT])
def test_parse_lenient_reads_what_models_write(text: str, expected: Any) -> None:
    assert parse_lenient(text) == expected


SURVIVORS: list[tuple[str, Any]] = [
    ('{"url": "https://example.com//path"}', {"url": "https://example.com//path"}),
    ("{'url': 'https://x.org//p', c: '/* no */'}", {"url": "https://x.org//p", "c": "/* no */"}),
    ('{"a": "x,]", "b": "y,}", "c": "it\'s", "d": "True None"}', None),
    (
        "{'a': 'x,]', “b”: “,} // no”, 'c': 'it’s, ok'}",
        {"a": "x,]", "b": ",} // no", "c": "it’s, ok"},
    ),
]


@pytest.mark.parametrize(("text", "expected"), SURVIVORS, ids=[t for t, _ in SURVIVORS])
def test_parse_lenient_leaves_string_contents_alone(text: str, expected: Any) -> None:
    assert parse_lenient(text) == (json.loads(text) if expected is None else expected)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"a": 1,\n  "b": }', "line 2, column 8"),
        ('{"a": 1\n "b": 2}', "line 2, column 2"),
        ("{'a': 'never closed}", "a string is never closed (from line 1, column 7)"),
        ('{"a": 1 /* open', "a /* comment is never closed (from line 1, column 9)"),
        ('{"a": undefined}', "line 1, column 7"),
        ('{"a": NaN}', "NaN is not a JSON number"),
        ("", "line 1, column 1"),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_parse_lenient_says_where_it_failed(text: str, where: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_lenient(text)
    assert where in str(caught.value)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(JSON_VALUES, st.booleans(), st.sampled_from([None, 0, 2]))
def test_strict_json_passes_unchanged(value: Any, ascii_only: bool, indent: int | None) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    assert parse_lenient(text) == json.loads(text)


# --- blocks -----------------------------------------------------------------------------------


def test_form_block_round_trips_through_find_blocks() -> None:
    checked = check_spec({**MAILBOX, "subtitle": "Accès en lecture — `imap` 🔑"})
    block = form_block(checked)
    assert block.startswith("```data-vault-form\n{\n") and block.endswith("\n}\n```")
    assert "Accès en lecture" in block  # not escaped to \u sequences
    assert block.count("```") == 2  # a backtick in a value cannot close the fence
    reply = f"Please fill in the form.\n\n{block}\n\nThanks."
    assert find_blocks(reply) == [(FORM_BLOCK, checked)]


def test_a_plain_field_takes_one_line() -> None:
    block = form_block(check_spec(spec()))
    assert '    {"name": "host", "label": "Host", "type": "text", "required": true' in block


def test_patch_block_round_trips_and_refuses_values() -> None:
    patch = {"form_id": "fm_1", "status_text": None, "fields": {"host": {"error": "Unreachable"}}}
    block = patch_block(patch)
    assert block.startswith("```data-vault-form-patch\n")
    assert find_blocks(block) == [(PATCH_BLOCK, check_patch(patch))]
    with pytest.raises(InvalidInputError, match="must not carry credential values"):
        patch_block({"form_id": "fm_1", "fields": {"host": {"value": "db.internal"}}})


def test_find_blocks_in_order_skipping_what_does_not_parse() -> None:
    reply = "\n".join(
        [
            "```data-vault-form",
            "{form_id: 'a', engine: 'pg', title: 'T',}",
            "```",
            "```python",
            "```data-vault-form",  # inside another fence: text, not a block
            "```",
            "~~~~data-vault-form-patch",
            "{“form_id”: “a”, “status_text”: null}",
            "~~~~",
            "```data-vault-form-patch",
            "{not json",
            "```",
            "```data-vault-form",
            "[1, 2]",
            "```",
            "  ```DATA-VAULT-FORM-PATCH extra words",
            '{"form_id": "a", "_is_success": true}',
            "  ```",
            "```data-vault-form",
            '{"form_id": "never closed"}',
        ]
    )
    assert find_blocks(reply) == [
        (FORM_BLOCK, {"form_id": "a", "engine": "pg", "title": "T"}),
        (PATCH_BLOCK, {"form_id": "a", "status_text": None}),
        (PATCH_BLOCK, {"form_id": "a", "_is_success": True}),
    ]


def test_find_blocks_in_a_reply_without_any() -> None:
    assert find_blocks("no blocks here\n```json\n{}\n```") == []
    assert find_blocks("") == []


# --- reading a spec ----------------------------------------------------------------------------


def test_method_of_prefers_auth_method_then_selected_then_the_only_one() -> None:
    checked = check_spec(MAILBOX)
    assert method_of(checked) is None
    assert method_of({**checked, "selected_method": "app_password"})["id"] == "app_password"  # type: ignore[index]
    both = {**checked, "selected_method": "app_password", "auth_method": "service_account"}
    assert method_of(both)["id"] == "service_account"  # type: ignore[index]
    only = {**checked, "methods": checked["methods"][:1]}
    assert method_of(only)["id"] == "app_password"  # type: ignore[index]
    assert method_of(check_spec(spec())) is None


def test_fields_of_gives_top_level_then_method_fields() -> None:
    checked = check_spec({**MAILBOX, "fields": [{"name": "workspace"}]})
    assert [f["name"] for f in fields_of(checked)] == ["workspace"]
    names = [f["name"] for f in fields_of(checked, "service_account")]
    assert names == ["workspace", "key_json"]
    chosen = {**checked, "auth_method": "app_password"}
    assert [f["name"] for f in fields_of(chosen)] == ["workspace", "email", "app_password"]
    fields_of(chosen)[0]["label"] = "changed"
    assert checked["fields"][0]["label"] == "workspace"
    with pytest.raises(
        InvalidInputError, match=r"no method 'oauth'.*app_password, service_account"
    ):
        fields_of(checked, "oauth")


@pytest.mark.parametrize(
    ("field", "secret"),
    [
        ({"name": "host", "type": "text"}, False),
        ({"name": "pw", "type": "password"}, True),
        ({"name": "service_json", "type": "textarea"}, True),
        ({"name": "api_token", "type": "text"}, True),
        ({"name": "client_secret"}, True),
        ({"name": "region", "type": "select"}, False),
    ],
)
def test_is_secret_field(field: dict[str, Any], secret: bool) -> None:
    assert is_secret_field(field) is secret


def test_field_types_are_the_documented_ones() -> None:
    assert FIELD_TYPES == ("text", "password", "url", "select", "textarea", "boolean")


@pytest.mark.parametrize("form_id", [".", "..", "..."])
def test_a_form_id_of_dots_only_is_refused(form_id: str) -> None:
    """A browser normalises /connect/.. away: such a form's page could never open."""
    spec = {"form_id": form_id, "engine": "pg", "title": "T", "fields": [{"name": "host"}]}
    with pytest.raises(InvalidInputError, match="not only dots"):
        check_spec(spec)
