"""Submissions over a real ``scratchpad serve`` (SSE), and ``scratchpad vault connect / test``,
with the probe's model a script file (``SCRATCHPAD_PROBE_MODEL=scripted:FILE``)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from scratchpad.cli.app import app
from scratchpad.cli.background import stop
from scratchpad.config import Settings
from scratchpad.vault import Vault
from tests.connect.services import HTTP_CHECK, TOKEN, bearer_service, http_form
from tests.server_helpers import running_server

KEY = "test-key-connect"
runner = CliRunner()


def script(path: Path, verdict: dict[str, Any], code: str = HTTP_CHECK) -> Path:
    turns = [
        [{"name": "set_status", "input": {"text": "Calling the service"}}],
        [{"name": "scratchpad", "input": {"action": "exec", "name": "probe", "code": code,
                                          "one_line_description": "Call GET /me"}}],
        [verdict],
        "Done.",
    ]  # fmt: skip
    path.write_text(json.dumps(turns))
    return path


SUCCESS = {"name": "report_success", "input": {"summary": "The service answered as alice."}}
FAILURE = {
    "name": "report_failure",
    "input": {"error": "The service refused the key.", "follow_up": "Check the key."},
}


def sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of every frame of a raw event stream."""
    frames = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if not line.startswith(":")]
        if not lines:
            continue
        name = next(line[7:] for line in lines if line.startswith("event: "))
        data = json.loads(next(line[6:] for line in lines if line.startswith("data: ")))
        frames.append((name, data))
    return frames


@pytest.fixture
def server(hermetic_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[
    tuple[httpx.Client, subprocess.Popen[str], Path]
]:  # fmt: skip
    probe_script = script(tmp_path / "probe.json", SUCCESS)
    monkeypatch.setenv("SCRATCHPAD_PROBE_MODEL", f"scripted:{probe_script}")
    with running_server(hermetic_env, tmp_path, KEY) as (url, process):
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
            yield client, process, probe_script


def test_a_submission_streams_the_probe_and_saves_the_connection(
    server: tuple[httpx.Client, subprocess.Popen[str], Path], hermetic_env: Path
) -> None:
    client, process, _ = server
    with bearer_service() as url:
        body = {"form_spec": http_form(), "values": {"base_url": url, "api_key": TOKEN},
                "skipped": [], "conversation_id": "conv-1"}  # fmt: skip
        answer = client.post("/v1/datavault/submissions", json=body)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    frames = sse(answer.text)
    assert all(name == data["type"] for name, data in frames)
    assert [data["sequence_number"] for _, data in frames] == list(range(len(frames)))
    kinds = [name for name, _ in frames]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    roles = [d.get("thought_role") for _, d in frames if d["type"] == "response.in_progress"]
    assert roles == ["scratchpad.start", "scratchpad.result", "scratchpad.end"]
    response = frames[-1][1]["response"]
    assert response["status"] == "success"
    assert response["connection"]["engine"] == "http-api-key"
    assert TOKEN not in answer.text and url not in answer.text

    submission = client.get(f"/v1/datavault/submissions/{response['submission_id']}").json()
    assert submission["status"] == "success" and submission["conversation_id"] == "conv-1"
    assert submission["fields"] == ["base_url", "api_key"]
    assert TOKEN not in json.dumps(submission)
    listed = client.get("/v1/datasources").json()["datasources"]
    assert [(d["engine"], d["name"]) for d in listed] == [("http-api-key", "1")]

    tested = sse(client.post("/v1/datasources/http-api-key/1/test").text)
    assert tested[-1][1]["response"]["status"] == "success"
    assert len(client.get("/v1/datasources").json()["datasources"]) == 1

    process.terminate()
    log = process.communicate(timeout=30)[0]
    assert TOKEN not in log
    for path in hermetic_env.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_bad_submissions_answer_a_clear_error_before_any_stream(
    server: tuple[httpx.Client, subprocess.Popen[str], Path],
) -> None:
    client, _, _ = server
    form = http_form()
    cases = [
        ({"form_spec": form}, 422, "values"),
        ({"form_spec": form, "values": {"nope": "x"}}, 400, "values.nope"),
        ({"form_spec": {**form, "title": ""}, "values": {}}, 400, "form_spec: title"),
        (
            {
                "form_spec": form,
                "values": {},
                "form_id": "fm_other",
            },
            200,
            "",
        ),
    ]
    for body, status, words in cases[:3]:
        answer = client.post("/v1/datavault/submissions", json=body)
        assert answer.status_code == status, answer.text
        assert words in answer.json()["error"]
    missing = client.get("/v1/datavault/submissions/sub_000000000000")
    assert missing.status_code == 404 and missing.json()["type"] == "SubmissionNotFoundError"
    retry = sse(client.post("/v1/datavault/submissions", json=cases[3][0]).text)
    assert retry[-1][1]["response"]["status"] == "retry"  # required fields left empty


def test_a_named_submission_is_saved_as_named_and_a_pad_sees_its_variable_scrubbed(
    server: tuple[httpx.Client, subprocess.Popen[str], Path],
) -> None:
    client, _, _ = server
    variable = "DS_HTTP_API_KEY_PROD__API_KEY"
    values = {"base_url": "", "api_key": TOKEN}
    bad = {"form_spec": http_form(), "values": values, "connection_name": "../up"}
    refused = client.post("/v1/datavault/submissions", json=bad)
    assert refused.status_code == 400 and "invalid connection name" in refused.json()["error"]
    with bearer_service() as url:
        body = {"form_spec": http_form(), "values": {**values, "base_url": url},
                "connection_name": "prod"}  # fmt: skip
        frames = sse(client.post("/v1/datavault/submissions", json=body).text)
    response = frames[-1][1]["response"]
    assert response["status"] == "success", response
    assert response["connection"]["name"] == "prod"
    assert variable in response["connection"]["variables"]
    described = client.get(f"/v1/datavault/submissions/{response['submission_id']}").json()
    assert described["connection_name"] == "prod"
    code = f"import os\nprint('key:', os.environ[{variable!r}])"
    answer = client.post("/scratchpad/execute-stream", json={"name": "p", "code": code})
    last = [b for b in answer.text.split("\n\n") if b.startswith("data: ")][-1]
    cell = json.loads(last[6:])["cell"]
    assert cell["stdout"].strip() == f"key: [{variable}]"  # the pad's name for it


def test_a_client_that_goes_away_does_not_stop_the_probe(
    server: tuple[httpx.Client, subprocess.Popen[str], Path],
) -> None:
    client, _, _ = server
    with bearer_service() as url:
        body = {"form_spec": http_form(), "values": {"base_url": url, "api_key": TOKEN}}
        with client.stream("POST", "/v1/datavault/submissions", json=body) as answer:
            lines = answer.iter_lines()
            first = next(lines)
            while not first.startswith("data: "):
                first = next(lines)
        submission_id = json.loads(first[6:])["response"]["submission_id"]
        deadline = time.monotonic() + 60
        while client.get(f"/v1/datavault/submissions/{submission_id}").json()["status"] in (
            "staged", "probing",
        ):  # fmt: skip
            assert time.monotonic() < deadline, "the probe did not finish"
            time.sleep(0.2)
    assert client.get(f"/v1/datavault/submissions/{submission_id}").json()["status"] == "success"
    assert len(client.get("/v1/datasources").json()["datasources"]) == 1


def test_vault_connect_and_test_from_the_terminal(
    hermetic_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "SCRATCHPAD_PROBE_MODEL", f"scripted:{script(tmp_path / 'ok.json', SUCCESS)}"
    )
    with bearer_service() as url:
        asked = runner.invoke(app, ["vault", "connect", "http-api-key"],
                              input=f"{url}\n{TOKEN}\n\n")  # fmt: skip
        assert asked.exit_code == 0, asked.output
        assert TOKEN not in asked.output
        assert "Calling the service" in asked.output and "Call GET /me" in asked.output
        assert "Saved as http-api-key/1" in asked.output
        stored = Vault(Settings(home=hermetic_env), keyring=None).load("http-api-key", "1")
        assert stored == {"base_url": url, "api_key": TOKEN, "header": "Authorization"}

        tested = runner.invoke(app, ["vault", "test", "http-api-key", "1"])
        assert tested.exit_code == 0, tested.output
        missing = runner.invoke(app, ["vault", "test", "http-api-key", "9"])
        assert missing.exit_code == 2 and "no connection http-api-key/9" in missing.output

        failing = script(tmp_path / "no.json", FAILURE)
        monkeypatch.setenv("SCRATCHPAD_PROBE_MODEL", f"scripted:{failing}")
        values = json.dumps({"base_url": url, "api_key": TOKEN + "-wrong"})
        refused = runner.invoke(app, ["vault", "connect", "http-api-key", "--stdin"],
                                input=values)  # fmt: skip
    assert refused.exit_code == 1 and isinstance(refused.exception, SystemExit), refused.output
    assert "The service refused the key." in refused.output
    assert len(Vault(Settings(home=hermetic_env), keyring=None).list()) == 1


def test_vault_connect_saves_under_a_name_and_refuses_a_taken_or_bad_one_before_asking(
    hermetic_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "SCRATCHPAD_PROBE_MODEL", f"scripted:{script(tmp_path / 'ok.json', SUCCESS)}"
    )
    connect = ["vault", "connect", "http-api-key", "--name", "prod"]
    with bearer_service() as url:
        asked = runner.invoke(app, connect, input=f"{url}\n{TOKEN}\n\n")
    assert asked.exit_code == 0, asked.output
    assert "Saved as http-api-key/prod" in asked.output
    assert "DS_HTTP_API_KEY_PROD__API_KEY" in asked.output
    taken = runner.invoke(app, connect, input="never read\n")
    assert taken.exit_code == 2 and "http-api-key/prod exists already" in taken.output
    assert "base_url" not in taken.output.lower()  # nothing was asked
    bad = runner.invoke(app, ["vault", "connect", "http-api-key", "--name", "a/b"])
    assert bad.exit_code == 2 and "invalid connection name" in bad.output
    listed = Vault(Settings(home=hermetic_env), keyring=None).list()
    assert [(e["engine"], e["name"]) for e in listed] == [("http-api-key", "prod")]


def test_vault_connect_of_an_unknown_engine_says_how_to_name_fields(hermetic_env: Path) -> None:
    result = runner.invoke(app, ["vault", "connect", "acme"])
    assert result.exit_code == 2
    assert "--field NAME" in result.output


def test_a_chat_model_asks_for_credentials_and_learns_only_names_and_the_outcome(
    hermetic_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCRATCHPAD_PROBE_MODEL", f"scripted:{script(tmp_path / 'p.json', SUCCESS)}")
    spec = {"form_id": "fm_0a1b2c3d4e", **http_form()}
    block = "```data-vault-form\n" + json.dumps(spec) + "\n```"
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([
        [{"name": "request_credentials", "input": spec}],
        "Please fill in the form.\n" + block,
        "The service is connected.",
    ]))  # fmt: skip
    try:
        with bearer_service() as url:
            typed = f"connect my service\n{url}\n{TOKEN}\n/exit\n"
            result = runner.invoke(app, ["chat", "--model", f"scripted:{chat}"], input=typed)
    finally:
        stop(Settings(home=hermetic_env))
    assert result.exit_code == 0, result.output
    assert "The service is connected." in result.output and TOKEN not in result.output
    assert "data-vault-form" not in result.output  # the block is filled in, not shown
    history = next((hermetic_env / "sessions").glob("*.json")).read_text()
    assert "Result: success" in history and "fields: base_url, api_key" in history
    assert TOKEN not in history and url not in history
    stored = Vault(Settings(home=hermetic_env), keyring=None).load("http-api-key", "1")
    assert stored["api_key"] == TOKEN


def test_a_server_stopped_mid_probe_ends_the_stream_and_leaves_no_probe_behind(
    hermetic_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = "import time\nprint('waiting', flush=True)\ntime.sleep(120)"
    monkeypatch.setenv(
        "SCRATCHPAD_PROBE_MODEL", f"scripted:{script(tmp_path / 's.json', SUCCESS, slow)}"
    )
    body = {
        "form_spec": http_form(),
        "values": {"base_url": "http://127.0.0.1:9", "api_key": TOKEN},
    }
    frames: list[dict[str, Any]] = []
    with running_server(hermetic_env, tmp_path, KEY) as (url, process):
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.stream("POST", f"{url}/v1/datavault/submissions", json=body, headers=headers,
                          timeout=60) as answer:  # fmt: skip
            for line in answer.iter_lines():
                if not line.startswith("data: "):
                    continue
                frames.append(json.loads(line[6:]))
                if frames[-1].get("thought_role") == "scratchpad.start":
                    time.sleep(0.5)  # the cell is running
                    process.terminate()
        assert process.wait(timeout=60) in (0, -signal.SIGTERM)  # uvicorn re-raises it
    assert frames[-1]["type"] == "response.failed"
    assert "stopped" in frames[-1]["response"]["error"]["message"]
    assert list((hermetic_env / "probes").iterdir()) == []
    assert not any(
        str(hermetic_env) in str(path.resolve())
        for path in Path("/proc").glob("[0-9]*/cwd")
        if path.exists()
    )


def test_a_chat_form_with_methods_and_a_value_of_several_lines(
    hermetic_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe_script = tmp_path / "p.json"
    probe_script.write_text(json.dumps([[SUCCESS], "Done."]))
    monkeypatch.setenv("SCRATCHPAD_PROBE_MODEL", f"scripted:{probe_script}")
    spec = {"engine": "gcp", "title": "Connect GCP", "methods": [
        {"id": "key", "label": "API key", "fields": [{"name": "api_key", "type": "password"}]},
        {"id": "account", "label": "Service account",
         "fields": [{"name": "account_json", "type": "textarea", "required": True}]},
    ]}  # fmt: skip
    block = "```data-vault-form\n" + json.dumps(spec) + "\n```"
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([block, "Connected."]))
    lines = ['{"type": "service_account",', f'  "private_key": "{TOKEN}",', '  "id": 7}']
    typed = "connect gcp\naccount\n" + "\n".join(lines) + "\n.\n/exit\n"
    try:
        result = runner.invoke(app, ["chat", "--model", f"scripted:{chat}"], input=typed)
    finally:
        stop(Settings(home=hermetic_env))
    assert result.exit_code == 0, result.output
    assert TOKEN not in result.output
    stored = Vault(Settings(home=hermetic_env), keyring=None).load("gcp", "1")
    assert stored == {"account_json": "\n".join(lines), "_auth_method": "account"}
    history = next((hermetic_env / "sessions").glob("*.json")).read_text()
    assert "Result: success" in history and "private_key" not in history


def test_vault_connect_refuses_unknown_fields_and_a_missing_model_before_asking(
    hermetic_env: Path, tmp_path: Path
) -> None:
    typo = runner.invoke(app, ["vault", "connect", "http-api-key", "--stdin"],
                         input=json.dumps({"base_ur": "https://x.example"}))  # fmt: skip
    assert typo.exit_code == 2 and "no field base_ur in this form" in typo.output
    no_model = runner.invoke(app, ["vault", "connect", "http-api-key"], input="")
    assert no_model.exit_code == 2
    assert "SCRATCHPAD_PROBE_MODEL" in no_model.output and "Base URL" not in no_model.output
