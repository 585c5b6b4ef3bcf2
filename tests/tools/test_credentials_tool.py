"""request_credentials and update_form through a real registry."""

from __future__ import annotations

import json
from typing import Any

from scratchpad.tools.credentials_tool import request_credentials_tool, update_form_tool
from scratchpad.tools.registry import ToolRegistry
from scratchpad.vault.forms import (
    FIELD_TYPES,
    FORM_BLOCK,
    PATCH_BLOCK,
    check_patch,
    check_spec,
    find_blocks,
)

POSTHOG: dict[str, Any] = {
    "form_id": "fm_5be01c7d92",
    "engine": "posthog",
    "title": "Connect to PostHog",
    "subtitle": "A read-only key for the analytics project.",
    "logo": "key",
    "fields": [
        {"name": "host", "label": "Host", "type": "url", "default": "https://app.posthog.com"},
        {"name": "api_key", "label": "Personal API key", "type": "password", "required": True},
    ],
}


def registry() -> ToolRegistry:
    return ToolRegistry([request_credentials_tool(), update_form_tool()])


async def test_a_good_spec_gives_a_block_that_reads_back_as_the_checked_spec() -> None:
    outcome = await registry().dispatch("request_credentials", POSTHOG, None)
    assert outcome.ok, outcome.text
    assert outcome.text.startswith("Put this block in your reply exactly as it is")
    assert find_blocks(outcome.text) == [(FORM_BLOCK, check_spec(POSTHOG))]
    assert "DS_POSTHOG_<NAME>__HOST, DS_POSTHOG_<NAME>__API_KEY" in outcome.text
    assert "never see the values" in outcome.text and "side panel" in outcome.text


async def test_a_form_id_is_made_when_absent() -> None:
    spec = {key: value for key, value in POSTHOG.items() if key != "form_id"}
    outcome = await registry().dispatch("request_credentials", spec, None)
    [(kind, form)] = find_blocks(outcome.text)
    assert kind == FORM_BLOCK and form["form_id"].startswith("fm_")
    assert form == check_spec({**spec, "form_id": form["form_id"]})


async def test_a_bad_spec_names_the_key_to_fix() -> None:
    bad = {**POSTHOG, "fields": [POSTHOG["fields"][0], {"name": "api_key", "type": "secret"}]}
    outcome = await registry().dispatch("request_credentials", bad, None)
    assert not outcome.ok and outcome.reason == "invalid_form"
    assert outcome.text.startswith("The form was not shown: fields[1].type: 'secret' is not one")
    assert outcome.text.endswith("Fix it and call request_credentials again.")
    assert FORM_BLOCK not in outcome.text


async def test_required_keys_and_values_are_refused() -> None:
    tools = registry()
    missing = await tools.dispatch("request_credentials", {"engine": "posthog"}, None)
    assert not missing.ok and "missing required field 'title'" in missing.text
    with_value = {**POSTHOG, "fields": [{"name": "api_key", "value": "phx_secret_value"}]}
    refused = await tools.dispatch("request_credentials", with_value, None)
    assert not refused.ok and "fields[0].value" in refused.text
    assert "must not carry credential values" in refused.text


async def test_fields_and_methods_sent_as_json_text_are_read() -> None:
    spec = {**POSTHOG, "fields": json.dumps(POSTHOG["fields"])}
    outcome = await registry().dispatch("request_credentials", spec, None)
    assert outcome.ok, outcome.text
    assert find_blocks(outcome.text) == [(FORM_BLOCK, check_spec(POSTHOG))]
    methods = (
        "[{id: 'app_password', label: 'App password', fields: “[{'name': 'email'}, "
        "{'name': 'app_password', 'type': 'password'}]”}, // the usual way\n"
        " {'id': 'oauth', 'fields': [{'name': 'client_id'}]},]"
    )
    mailbox = {"engine": "mailbox", "title": "Connect a mailbox", "methods": methods}
    outcome = await registry().dispatch("request_credentials", mailbox, None)
    assert outcome.ok, outcome.text
    [(_, form)] = find_blocks(outcome.text)
    assert [f["name"] for f in form["methods"][0]["fields"]] == ["email", "app_password"]
    assert (
        "DS_MAILBOX_<NAME>__EMAIL, DS_MAILBOX_<NAME>__APP_PASSWORD, DS_MAILBOX_<NAME>__CLIENT_ID"
        in (outcome.text)
    )
    assert "a method's fields only when it is the one chosen" in outcome.text


async def test_unreadable_json_text_says_where() -> None:
    spec = {**POSTHOG, "fields": '[{"name": "host",\n  "type": }]'}
    outcome = await registry().dispatch("request_credentials", spec, None)
    assert not outcome.ok
    assert "fields: not valid JSON: Expecting value at line 2, column 11" in outcome.text


async def test_a_known_engine_without_fields_gets_its_standard_form() -> None:
    spec = {"engine": "postgres", "title": "Connect to the warehouse"}
    outcome = await registry().dispatch("request_credentials", spec, None)
    assert outcome.ok, outcome.text
    [(_, form)] = find_blocks(outcome.text)
    assert form["title"] == "Connect to the warehouse" and form["logo"] == "database"
    names = [field["name"] for field in form["fields"]]
    assert names == ["host", "port", "database", "user", "password", "sslmode"]
    assert "DS_POSTGRES_<NAME>__PASSWORD" in outcome.text


async def test_update_form_gives_a_patch_block() -> None:
    patch = {
        "form_id": "fm_5be01c7d92",
        "form_error": "The key was refused.",
        "status_text": None,
        "fields": {"api_key": {"error": "Key refused by the server", "status": None}, "host": None},
    }
    outcome = await registry().dispatch("update_form", patch, None)
    assert outcome.ok, outcome.text
    assert outcome.text.startswith("Put this block in your reply exactly as it is")
    assert find_blocks(outcome.text) == [(PATCH_BLOCK, check_patch(patch))]
    as_text = {**patch, "fields": json.dumps(patch["fields"])}
    again = await registry().dispatch("update_form", as_text, None)
    assert find_blocks(again.text) == [(PATCH_BLOCK, check_patch(patch))]


async def test_update_form_refuses_values_and_needs_a_form_id() -> None:
    tools = registry()
    patch = {"form_id": "fm_1", "fields": {"api_key": {"value": "phx_secret_value"}}}
    refused = await tools.dispatch("update_form", patch, None)
    assert not refused.ok and refused.reason == "invalid_form"
    assert "fields.api_key.value: form specs and patches must not carry credential values" in (
        refused.text
    )
    assert "phx_secret_value" not in refused.text
    missing = await tools.dispatch("update_form", {"subtitle": "x"}, None)
    assert not missing.ok and "missing required field 'form_id'" in missing.text
    unknown = await tools.dispatch("update_form", {"form_id": "f", "fields": {"a": {"x": 1}}}, None)
    assert not unknown.ok and "fields.a: unknown key 'x'" in unknown.text


def test_what_the_model_is_offered() -> None:
    tools = registry()
    assert tools.names() == ["request_credentials", "update_form"]  # no fetch_submission
    [fragment] = tools.prompt_fragments()
    assert "Never ask" in fragment and "request_credentials" in fragment
    request = tools.get("request_credentials")
    assert request is not None
    assert request.input_schema["required"] == ["engine", "title"]
    field_schema = request.input_schema["properties"]["fields"]["anyOf"][0]["items"]
    assert field_schema["properties"]["type"]["enum"] == list(FIELD_TYPES)
    assert "never ask the person to paste a secret" in request.description
    update = tools.get("update_form")
    assert update is not None and update.input_schema["required"] == ["form_id"]
