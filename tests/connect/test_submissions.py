"""Staging submissions: the request's shape checked, values kept in memory only, bounded."""

from __future__ import annotations

import pytest

from scratchpad.connect import submissions as module
from scratchpad.connect.submissions import Submissions
from scratchpad.errors import InvalidInputError, SubmissionNotFoundError
from tests.connect.services import TOKEN, http_form


def test_a_submission_keeps_values_apart_from_what_it_shows() -> None:
    staged = Submissions().stage(http_form(), {"base_url": "https://x.example", "api_key": TOKEN},
                                 conversation_id="c1")  # fmt: skip
    assert staged.id.startswith("sub_") and len(staged.id) == 16
    shown = staged.describe()
    assert shown["fields"] == ["base_url", "api_key"] and shown["status"] == "staged"
    assert TOKEN not in repr(shown) and TOKEN not in repr(staged)
    staged.forget_values()
    assert staged.values == {}


@pytest.mark.parametrize(
    ("form", "values", "skipped", "words"),
    [
        (http_form(), {"nope": "x"}, [], "values.nope: the form has no such field"),
        (http_form(), {"api_key": 5j}, [], "values.api_key must be text"),
        (http_form(), {"api_key": "a\0b"}, [], "NUL"),
        (http_form(), {"api_key": "x" * 70_000}, [], "longer than 64 KiB"),
        (http_form(), {}, ["nope"], "skipped: the form has no field 'nope'"),
        (http_form(), {}, "api_key", "skipped must be a list"),
        ({"engine": "x", "title": "t", "fields": [{"name": "_auth_method"}]}, {}, [],
         "the vault's own"),
        ({"engine": "x", "title": "t", "methods": [{"id": "a", "fields": [{"name": "k"}]},
                                                   {"id": "b", "fields": [{"name": "j"}]}]},
         {}, [], "say which was used with auth_method"),
        ("not a form", {}, [], "form_spec must be the form object"),
        ({"engine": "x", "title": "t", "fields": [{"name": "api-key"}, {"name": "api_key"}]},
         {}, [], "would be the same variable"),
        (http_form(), {"api_key": None}, [], "must be text, not null"),
    ],
)  # fmt: skip
def test_bad_submissions_are_refused_saying_what_is_wrong(
    form: object, values: object, skipped: object, words: str
) -> None:
    with pytest.raises(InvalidInputError, match=words) as raised:
        Submissions().stage(form, values, skipped)
    assert TOKEN not in str(raised.value)


def test_a_form_id_must_match_the_spec() -> None:
    with pytest.raises(InvalidInputError, match="is not the form_spec's"):
        Submissions().stage(http_form(form_id="fm_0123456789"), {}, form_id="fm_9876543210")


def test_submissions_expire_and_unknown_ids_say_what_to_do() -> None:
    now = [0.0]
    store = Submissions(ttl_s=60, clock=lambda: now[0])
    staged = store.stage(http_form(), {})
    assert store.get(staged.id) is staged
    now[0] = 61
    with pytest.raises(SubmissionNotFoundError, match="submit the form again"):
        store.get(staged.id)
    with pytest.raises(SubmissionNotFoundError):
        store.get(None)


def test_only_live_submissions_count_against_the_cap_and_ended_ones_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(module, "MAX_STAGED", 3)
    monkeypatch.setattr(module, "MAX_ENDED", 2)
    store = Submissions()
    live = [store.stage(http_form(), {}) for _ in range(3)]
    with pytest.raises(InvalidInputError, match="3 submissions are waiting or being probed"):
        store.stage(http_form(), {})
    for submission in live:
        submission.status = "retry"  # their probes ended
    more = store.stage(http_form(), {})
    assert len(store) == 3  # the oldest ended one was let go
    with pytest.raises(SubmissionNotFoundError):
        store.get(live[0].id)
    assert store.get(live[2].id) and store.get(more.id)
