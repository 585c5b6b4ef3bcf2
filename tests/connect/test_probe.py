"""The probe end to end in this process: a scripted model, real pads, real local services."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from scratchpad.config import Settings
from scratchpad.connect import run_probe, saved_submission, stage
from scratchpad.connect.submissions import Submission
from scratchpad.errors import InvalidInputError
from scratchpad.llm.messages import Message, StreamEvent, TextDelta, ToolResultBlock
from scratchpad.llm.scripted import ScriptedProvider, TextAndCalls, Turn
from scratchpad.scrub import scrub
from scratchpad.vault.engines import engine_form
from scratchpad.vault.forms import PATCH_BLOCK, find_blocks, merge_patch
from scratchpad.vault.store import Vault
from tests.connect.services import (
    HTTP_CHECK,
    POSTGRES_CHECK,
    SQLITE_CHECK,
    TOKEN,
    bearer_service,
    call,
    cell,
    http_form,
    postgres_service,
)


@pytest.fixture
def probe_settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", kernel_start_timeout_s=30.0, probe_timeout_s=60.0)


@pytest.fixture
def vault(probe_settings: Settings) -> Vault:
    return Vault(probe_settings, keyring=None)


def last_result(messages: list[Message]) -> str:
    for message in reversed(messages):
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                return "\n".join(getattr(b, "text", "") for b in block.content)
    return ""


def judged(expect: str, success: Turn, failure: Turn) -> Any:
    """A turn decided by the last tool result, as a model reading it would."""
    return lambda messages: success if expect in last_result(messages) else failure


async def probe(
    submission: Submission,
    turns: list[Any],
    vault: Vault,
    settings: Settings,
    saved: tuple[str, str] | None = None,
) -> tuple[list[dict[str, Any]], ScriptedProvider]:
    provider = ScriptedProvider(turns)
    events = [
        event
        async for event in run_probe(
            submission, provider=provider, vault=vault, settings=settings, saved=saved
        )
    ]
    return events, provider


def final(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert events[-1]["type"] in ("response.completed", "response.failed")
    return dict(events[-1]["response"])


def patches(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        block
        for event in events
        if event["type"] == "response.output_text.delta"
        for kind, block in find_blocks(event["delta"])
        if kind == PATCH_BLOCK
    ]


def cell_texts(events: list[dict[str, Any]]) -> str:
    return "\n".join(
        e["thought"]["text"] for e in events if e.get("thought_role") == "scratchpad.result"
    )


SUCCESS = [call("report_success", summary="The service answered as alice.")]
FAILURE = [call("report_failure", error="The service refused the API key (HTTP 401).",
                follow_up="Create a new key and paste it again.")]  # fmt: skip


async def test_a_probe_that_works_saves_a_new_connection_each_time_and_leaves_nothing(
    vault: Vault, probe_settings: Settings
) -> None:
    with bearer_service() as url:
        results = []
        for _ in range(2):
            submission = stage(http_form(), {"base_url": url, "api_key": TOKEN})
            turns = [
                [call("set_status", text="Calling the service"),
                 call("set_field_status", name="api_key", status="Validating…")],
                [cell(HTTP_CHECK)],
                judged("HTTP 200 alice", SUCCESS, FAILURE),
                "Done.",
            ]  # fmt: skip
            events, provider = await probe(submission, turns, vault, probe_settings)
            results.append((submission, events, provider))

    for number, (submission, events, provider) in enumerate(results, start=1):
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        assert events[0]["type"] == "response.created"
        response = final(events)
        assert response["status"] == "success", response
        assert response["connection"]["name"] == str(number)  # never over the first
        assert (
            "DS_HTTP_API_KEY_1__API_KEY" in results[0][1][-1]["response"]["connection"]["variables"]
        )
        texts = cell_texts(events)
        assert "env mode 0o600" in texts and "HTTP 200 alice" in texts
        shown = json.dumps(events)
        assert TOKEN not in shown and url not in shown  # every submitted value scrubbed
        assert TOKEN not in repr(provider.requests)  # the model never saw it either
        assert submission.values == {} and submission.status == "success"
        assert TOKEN not in json.dumps(submission.describe())
        states = patches(events)
        assert any(p.get("status_text") == "Calling the service" for p in states)
        assert any(p.get("_is_success") is True for p in states)
    assert vault.load("http-api-key", "1") == {"base_url": url, "api_key": TOKEN}
    assert vault.load("http-api-key", "2") == {"base_url": url, "api_key": TOKEN}
    assert list((probe_settings.home / "probes").iterdir()) == []
    assert [e["event"] for e in vault.audit.read()].count("probe") == 2


async def test_a_saved_secret_is_scrubbed_as_the_variable_pads_get(
    vault: Vault, probe_settings: Settings
) -> None:
    """The probe names a value as its own file does (DS_API_KEY); saved, the value is
    scrubbed as the pads' variable, wherever it shows up next."""
    with bearer_service() as url:
        submission = stage(http_form(), {"base_url": url, "api_key": TOKEN})
        turns = [[cell(HTTP_CHECK)], judged("HTTP 200 alice", SUCCESS, FAILURE), "Done."]
        events, _ = await probe(submission, turns, vault, probe_settings)
    connection = final(events)["connection"]
    assert connection["name"] == "1"
    assert "DS_HTTP_API_KEY_1__API_KEY" in connection["variables"]
    assert scrub(f"key={TOKEN}") == "key=[DS_HTTP_API_KEY_1__API_KEY]"


async def test_a_named_submission_is_saved_under_its_name_never_over_another(
    vault: Vault, probe_settings: Settings
) -> None:
    names = []
    with bearer_service() as url:
        for _ in range(2):
            submission = stage(
                http_form(), {"base_url": url, "api_key": TOKEN}, connection_name="prod"
            )
            assert submission.describe()["connection_name"] == "prod"
            turns = [[cell(HTTP_CHECK)], judged("HTTP 200 alice", SUCCESS, FAILURE), "Done."]
            events, _ = await probe(submission, turns, vault, probe_settings)
            names.append(final(events)["connection"]["name"])
    assert names == ["prod", "prod-2"]
    assert "Saved as http-api-key/prod-2" in final(events)["output_text"]
    assert scrub(TOKEN) == "[DS_HTTP_API_KEY_PROD__API_KEY]"
    assert stage(http_form(), {}, connection_name="").connection_name is None  # the next number
    for bad in ("../up", "a/b", ".hidden", 5):
        with pytest.raises(InvalidInputError, match="invalid connection name"):
            stage(http_form(), {}, connection_name=bad)


async def test_a_refused_key_fails_with_the_diagnosis_and_leaves_the_vault_untouched(
    vault: Vault, probe_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with bearer_service() as url:
        submission = stage(http_form(), {"base_url": url, "api_key": TOKEN + "-wrong"})
        turns = [[cell(HTTP_CHECK)], judged("HTTP 401", FAILURE, SUCCESS), "The key is wrong."]
        events, _ = await probe(submission, turns, vault, probe_settings)
    response = final(events)
    assert response["status"] == "failed"
    assert response["error"] == "The service refused the API key (HTTP 401)."
    assert "HTTP 401" in cell_texts(events)
    assert vault.list() == []
    banner = [p for p in patches(events) if p.get("form_error")][-1]
    assert banner["form_error"] == response["error"] and banner["_is_probing"] is False
    assert TOKEN not in caplog.text and TOKEN not in json.dumps(events)


async def test_a_probe_asking_for_a_field_then_succeeding_on_resubmission(
    vault: Vault, probe_settings: Settings
) -> None:
    form = http_form()
    form["fields"] = form["fields"][:1]  # the form forgot the key
    extra = [call("request_extra_field", reason="The service needs an API key.",
                  fields=[{"name": "api_key", "label": "API key", "type": "password",
                           "required": True}])]  # fmt: skip
    with bearer_service() as url:
        first = stage(form, {"base_url": url})
        check = cell(HTTP_CHECK.replace('creds["DS_API_KEY"]', 'creds.get("DS_API_KEY", "")'))
        events, _ = await probe(first, [[check], judged("HTTP 401", extra, SUCCESS), "More."],
                                vault, probe_settings)  # fmt: skip
        response = final(events)
        assert response["status"] == "needs_input" and response["fields"] == ["api_key"]
        shown = form | {"form_id": first.form_id}
        for patch in patches(events):
            shown = merge_patch(shown, patch)  # what a form panel does
        assert [f["name"] for f in shown["fields"]] == ["base_url", "api_key"]
        assert shown["subtitle"] == "The service needs an API key."
        assert vault.list() == []

        again = stage(shown, {"base_url": url, "api_key": TOKEN})
        events, _ = await probe(again, [[cell(HTTP_CHECK)],
                                        judged("HTTP 200", SUCCESS, FAILURE), "Done."],
                                vault, probe_settings)  # fmt: skip
    assert final(events)["status"] == "success"
    assert vault.load("http-api-key", "1")["api_key"] == TOKEN


async def test_a_probe_without_a_verdict_fails(vault: Vault, probe_settings: Settings) -> None:
    submission = stage(http_form(), {"base_url": "http://127.0.0.1:9", "api_key": TOKEN})
    events, _ = await probe(submission, [[cell("print('looked')")], "I looked."], vault,
                            probe_settings)  # fmt: skip
    response = final(events)
    assert response["status"] == "failed"
    assert response["error"] == "Probe ended without a verdict."
    assert vault.list() == []


async def test_the_last_verdict_wins(vault: Vault, probe_settings: Settings) -> None:
    with bearer_service() as url:
        submission = stage(http_form(), {"base_url": url, "api_key": TOKEN})
        turns = [FAILURE, [cell(HTTP_CHECK)], judged("HTTP 200", SUCCESS, FAILURE), "Fixed."]
        events, _ = await probe(submission, turns, vault, probe_settings)
    assert final(events)["status"] == "success"


def processes_under(directory: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(directory) in os.readlink(entry / "cwd"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def test_a_probe_that_runs_too_long_times_out_and_its_kernel_is_gone(
    vault: Vault, probe_settings: Settings
) -> None:
    settings = probe_settings.model_copy(update={"probe_timeout_s": 6.0})
    submission = stage(http_form(), {"base_url": "http://127.0.0.1:9", "api_key": TOKEN})
    slow = cell("import time\nprint('waiting', flush=True)\ntime.sleep(120)")
    events, _ = await probe(submission, [[slow], "never"], vault, settings)
    response = final(events)
    assert response["status"] == "failed"
    assert response["error"] == "Probe timed out after 6s."
    assert "reachable" in response["follow_up"]
    roles = [e.get("thought_role") for e in events if e["type"] == "response.in_progress"]
    assert roles == ["scratchpad.start", "scratchpad.end"]  # the cell ended with the probe
    assert processes_under(settings.home / "probes") == []
    assert list((settings.home / "probes").iterdir()) == []


async def test_a_multi_method_form_tells_the_probe_every_method_and_saves_the_chosen_one(
    vault: Vault, probe_settings: Settings
) -> None:
    form = {
        "engine": "service",
        "title": "Connect the service",
        "fields": [{"name": "base_url", "type": "url", "required": True}],
        "methods": [
            {"id": "token", "label": "API token",
             "fields": [{"name": "api_key", "type": "password", "required": True}]},
            {"id": "basic", "label": "User and password",
             "fields": [{"name": "username"}, {"name": "password", "type": "password"}]},
        ],
        "auth_method": "token",
    }  # fmt: skip
    with bearer_service() as url:
        submission = stage(form, {"base_url": url, "api_key": TOKEN})
        turns = [[call("set_field_status", name="api_key", method_id="token", status="Checking")],
                 [cell(HTTP_CHECK)], judged("HTTP 200", SUCCESS, FAILURE), "Done."]  # fmt: skip
        events, provider = await probe(submission, turns, vault, probe_settings)
    brief = provider.requests[0]["system"]
    assert "* method 'token'" in brief and "- method 'basic'" in brief
    assert "api_key (api_key; password, required): filled (DS_API_KEY)" in brief
    assert "password (password; password): empty" in brief
    nested = [p["methods"]["token"]["fields"]["api_key"] for p in patches(events) if "methods" in p]
    assert {"status": "Checking"} in nested
    assert final(events)["status"] == "success"
    saved = vault.load("service", "1")
    assert saved == {"base_url": url, "api_key": TOKEN, "_auth_method": "token"}


async def test_a_sqlite_database_is_probed_and_tested_again_once_saved(
    vault: Vault, probe_settings: Settings, readable_dir: Path
) -> None:
    database = readable_dir / "data.db"  # a file the probe's pad may read, whoever it runs as
    with sqlite3.connect(database) as db:
        db.execute("create table items (id integer)")
        db.executemany("insert into items values (?)", [(1,), (2,), (3,)])
    ok = [call("report_success", summary="3 rows readable.")]
    turns = [[cell(SQLITE_CHECK)], judged("rows 3", ok, FAILURE), "Done."]
    submission = stage({"engine": "sqlite", "title": "Local data",
                        "fields": [{"name": "path", "required": True}]},
                       {"path": str(database)})  # fmt: skip
    events, _ = await probe(submission, turns, vault, probe_settings)
    assert final(events)["status"] == "success"

    again = saved_submission(vault, "sqlite", "1")
    events, _ = await probe(again, list(turns), vault, probe_settings, saved=("sqlite", "1"))
    assert final(events)["status"] == "success"
    assert len(vault.list()) == 1  # testing saved nothing new


async def test_fields_to_fix_answer_retry_without_running_a_probe(
    vault: Vault, probe_settings: Settings
) -> None:
    form = {"engine": "postgres", "title": "Postgres",
            "fields": [{"name": "host", "required": True}, {"name": "port"},
                       {"name": "password", "type": "password"}]}  # fmt: skip
    submission = stage(form, {"host": "db.internal", "port": "five", "password": "abc"})
    events, provider = await probe(submission, ["never asked"], vault, probe_settings)
    response = final(events)
    assert response["status"] == "retry"
    assert set(response["fields"]) == {"port", "password"}
    assert provider.requests == []
    errors = patches(events)[0]["fields"]
    assert errors["port"]["error"] and "at least 6" in errors["password"]["error"]


async def test_a_model_that_fails_ends_the_stream_with_response_failed(
    vault: Vault, probe_settings: Settings
) -> None:
    submission = stage(http_form(), {"base_url": "http://127.0.0.1:9", "api_key": TOKEN})
    events, _ = await probe(submission, [], vault, probe_settings)  # no turns: LLMError
    assert events[-1]["type"] == "response.failed"
    error = events[-1]["response"]["error"]
    assert error["code"] == "LLMError" and "could not be tested" in error["message"]
    assert patches(events)[-1]["_is_probing"] is False
    assert list((probe_settings.home / "probes").iterdir()) == []


def every_file(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file() and not path.is_symlink()]


async def test_no_submitted_value_is_left_in_any_file_of_the_home(
    vault: Vault, probe_settings: Settings
) -> None:
    with bearer_service() as url:
        submission = stage(http_form(), {"base_url": url, "api_key": TOKEN})
        leaky = cell(HTTP_CHECK + "print(creds['DS_API_KEY'])\nprint(repr(creds))")
        turns = [[leaky], judged("HTTP 200", SUCCESS, FAILURE), "Done."]
        events, provider = await probe(submission, turns, vault, probe_settings)
    assert final(events)["status"] == "success"
    assert "[DS_API_KEY]" in cell_texts(events)  # printed, and scrubbed on its way out
    assert TOKEN not in json.dumps(events) and TOKEN not in repr(provider.requests)
    for path in every_file(probe_settings.home):
        assert TOKEN.encode() not in path.read_bytes(), path


async def test_a_local_postgres_is_probed_with_its_client_and_saved(
    vault: Vault, probe_settings: Settings
) -> None:
    ok = [call("report_success", summary="Logged in; SELECT works.")]
    with postgres_service() as server:
        submission = stage(engine_form("postgres"), server)
        turns = [[cell(POSTGRES_CHECK)], judged("logged in 42", ok, FAILURE), "Done."]
        events, _ = await probe(submission, turns, vault, probe_settings)
        wrong = stage(engine_form("postgres"), {**server, "password": "not-the-password"})
        judge = judged("password authentication failed", FAILURE, ok)
        refused, _ = await probe(wrong, [[cell(POSTGRES_CHECK)], judge, "Done."], vault,
                                 probe_settings)  # fmt: skip
    assert final(events)["status"] == "success", cell_texts(events)
    assert vault.load("postgres", "1")["password"] == server["password"]
    assert server["password"] not in json.dumps(events)
    assert final(refused)["status"] == "failed", cell_texts(refused)
    assert "password authentication failed" in cell_texts(refused)
    assert len(vault.list()) == 1


class ChunkyProvider(ScriptedProvider):
    """Streams text four characters at a time, as real adapters stream tokens."""

    async def stream(self, **kwargs: Any) -> AsyncIterator[StreamEvent]:
        async for event in super().stream(**kwargs):
            if isinstance(event, TextDelta):
                for start in range(0, len(event.text), 4):
                    yield TextDelta(event.text[start : start + 4])
            else:
                yield event


async def test_nothing_the_probe_writes_leaks_a_value_anywhere(
    vault: Vault, probe_settings: Settings
) -> None:
    """A careless probe: its prose (streamed in pieces), a long status, a verdict and a new
    field's help all hold the token; none of it reaches the stream or the submission's record,
    and a new field may not be named after a value."""
    submission = stage(http_form(), {"base_url": "http://127.0.0.1:9", "api_key": TOKEN})
    careless: list[Turn] = [
        TextAndCalls(f"I won't say {TOKEN}.", (call("set_status", text="x" * 985 + TOKEN),)),
        [call("request_extra_field", reason="r", fields=[{"name": TOKEN}])],
        [call("request_extra_field", reason="r", fields=[{}])],
        [call("request_extra_field", reason="r", fields=[{"name": "api_key", "type": "text"}])],
        [call("request_extra_field", reason=f"need {TOKEN}",
              fields=[{"name": "region", "help": f"not {TOKEN}"}])],
        [call("report_failure", error=f"rejected {TOKEN}", follow_up=f"not {TOKEN}")],
        "Done.",
    ]  # fmt: skip
    provider = ChunkyProvider(careless)
    events = [e async for e in run_probe(submission, provider=provider, vault=vault,
                                         settings=probe_settings)]  # fmt: skip
    shown = json.dumps(events) + json.dumps(submission.describe())
    for piece in (TOKEN, TOKEN[:8], TOKEN[-8:]):
        assert piece not in shown
    refusals = repr([  # the tool results the model read (its own words hold the token here)
        block for m in provider.requests[-1]["messages"] for block in m.content
        if isinstance(block, ToolResultBlock)
    ])  # fmt: skip
    assert "must not hold a submitted value" in refusals
    assert "every field needs a name" in refusals and "has a field 'api_key' already" in refusals
    assert TOKEN not in refusals
    assert final(events)["status"] == "failed"  # the last verdict
    assert "[DS_API_KEY]" in "".join(
        e["delta"] for e in events if e["type"] == "response.output_text.delta"
    )


async def test_names_equal_to_a_value_stay_names(vault: Vault, probe_settings: Settings) -> None:
    """A value that is also the engine's name, or the form's id, is scrubbed from what the
    probe says, but names and ids stay as they are (the stream still ends properly)."""
    form = {"engine": "postgres", "title": "Postgres", "form_id": "postgres-form",
            "fields": [{"name": "user", "required": True}, {"name": "database"}]}  # fmt: skip
    submission = stage(form, {"user": "postgres", "database": "postgres-form"})
    turns = [[call("set_status", text="as postgres")], SUCCESS, "Done."]
    events, _ = await probe(submission, turns, vault, probe_settings)
    response = final(events)
    assert response["status"] == "success"
    assert response["connection"]["engine"] == "postgres"
    assert "Saved as postgres/1" in response["output_text"]
    assert response["form_id"] == "postgres-form"
    assert any(p.get("status_text") == "as [DS_USER]" for p in patches(events))


async def test_a_probe_left_by_a_process_that_died_is_removed(
    vault: Vault, probe_settings: Settings
) -> None:
    probes = probe_settings.home / "probes"
    dead = probes / "sub_000000000000-999999999-0a0b0c0d"  # no such process
    live = probes / f"sub_111111111111-{os.getpid()}-0a0b0c0d"
    for directory in (dead, live):
        directory.mkdir(parents=True)
        (directory / "credentials.env").write_text(f'DS_API_KEY="{TOKEN}"\n')
    submission = stage(http_form(), {"base_url": "http://127.0.0.1:9", "api_key": TOKEN})
    await probe(submission, [FAILURE, "Done."], vault, probe_settings)
    assert not dead.exists() and live.exists()
