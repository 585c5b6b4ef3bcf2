"""The model's pending forms: kept under their id, checked, ended once, awaited, expired."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from scratchpad.connect import pending
from scratchpad.connect.pending import PendingForms
from scratchpad.errors import FormClosedError, FormNotFoundError, InvalidInputError
from scratchpad.vault.forms import patch_block
from tests.connect.services import http_form

CONNECTION = {"engine": "http-api-key", "name": "1", "variables": ["DS_HTTP_API_KEY_1__API_KEY"]}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_form_is_checked_kept_under_its_id_and_described_without_values() -> None:
    forms = PendingForms()
    form = forms.open(http_form(form_id="fm_test1"))
    assert forms.get("fm_test1") is form
    assert form.describe() == {
        "form_id": "fm_test1", "spec": form.spec, "status": "open", "connection": None
    }  # fmt: skip
    with pytest.raises(InvalidInputError, match="already in use"):
        forms.open(http_form(form_id="fm_test1"))
    with pytest.raises(InvalidInputError, match="title"):
        forms.open({"engine": "x"})
    with pytest.raises(FormNotFoundError, match="request_credentials again"):
        forms.get("fm_nope")


def test_an_ended_form_keeps_its_first_outcome_and_takes_no_submission() -> None:
    forms = PendingForms()
    form = forms.open(http_form())
    forms.complete(form.form_id, {**CONNECTION, "values": {"api_key": "never"}})
    forms.decline(form.form_id)
    assert form.status == "completed" and form.connection == CONNECTION
    with pytest.raises(FormClosedError, match="completed"):
        forms.submission_spec(form.form_id, http_form())


def test_the_stored_spec_wins_and_only_the_choice_of_method_is_taken() -> None:
    forms = PendingForms()
    methods = [
        {"id": "key", "fields": [{"name": "api_key", "type": "password"}]},
        {"id": "basic", "fields": [{"name": "user"}, {"name": "password", "type": "password"}]},
    ]
    form = forms.open({"engine": "svc", "title": "Svc", "methods": methods})
    widened = {**form.spec, "auth_method": "basic", "fields": [{"name": "extra"}]}
    spec = forms.submission_spec(form.form_id, widened)
    assert spec == {**form.spec, "auth_method": "basic"}
    assert forms.submission_spec(form.form_id, {"auth_method": "other"}) == form.spec


async def test_wait_answers_when_the_form_ends_or_after_the_timeout() -> None:
    forms = PendingForms()
    form = forms.open(http_form())
    still = await asyncio.wait_for(forms.wait(form.form_id, 0.05), 5)
    assert still.status == "open"
    waiter = asyncio.create_task(forms.wait(form.form_id, 60))
    await asyncio.sleep(0)
    await asyncio.to_thread(forms.complete, form.form_id, CONNECTION)  # from another thread
    ended = await asyncio.wait_for(waiter, 5)
    assert ended.status == "completed"


async def test_an_open_form_expires_then_is_forgotten_and_ended_ones_are_capped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    forms = PendingForms(ttl_s=10, clock=clock)
    form = forms.open(http_form())
    clock.now = 10
    assert forms.get(form.form_id).status == "expired"
    clock.now = 20
    assert not forms.knows(form.form_id)
    monkeypatch.setattr(pending, "MAX_ENDED", 2)
    ids = [forms.open(http_form()).form_id for _ in range(3)]
    for form_id in ids:
        forms.decline(form_id)
    assert [forms.knows(i) for i in ids] == [False, True, True]


def test_waiting_lists_the_open_forms_newest_first() -> None:
    clock = Clock()
    forms = PendingForms(ttl_s=10, clock=clock)
    old = forms.open(http_form(title="Old"))
    clock.now = 5
    done = forms.open(http_form())
    new = forms.open(http_form(title="New", engine="svc"))
    new.created_at = old.created_at + 1
    forms.complete(done.form_id, CONNECTION)
    listed = forms.waiting()
    assert [(f["form_id"], f["title"], f["engine"]) for f in listed] == [
        (new.form_id, "New", "svc"),
        (old.form_id, "Old", "http-api-key"),
    ]
    assert listed[1]["expires_at"] == old.created_at + 10
    clock.now = 10  # the old one expired
    assert [f["form_id"] for f in forms.waiting()] == [new.form_id]


async def events(*items: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    for item in items:
        yield item


async def test_follow_completes_on_success_and_adds_the_fields_a_probe_asks_for() -> None:
    forms = PendingForms()
    form = forms.open(http_form())
    new = {"name": "org_id", "label": "Organisation"}
    block = patch_block({"form_id": form.form_id, "subtitle": "x", "fields": {"org_id": new}})
    needs = events(
        {"type": "response.output_text.delta", "delta": "\n" + block + "\n"},
        {"type": "response.completed", "response": {"status": "needs_input"}},
    )
    passed = [event async for event in forms.follow(form.form_id, needs)]
    assert len(passed) == 2 and form.status == "open"
    assert [f["name"] for f in form.spec["fields"]] == ["base_url", "api_key", "org_id"]
    assert "subtitle" not in form.spec
    done = events({"type": "response.completed",
                   "response": {"status": "success", "connection": CONNECTION}})  # fmt: skip
    assert len([event async for event in forms.follow(form.form_id, done)]) == 1
    assert forms.get(form.form_id).describe()["status"] == "completed"
    assert form.connection == CONNECTION
