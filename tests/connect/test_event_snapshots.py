"""The bytes of a credential submission's events, pinned (``tests/server/snapshots/``): a
submission whose fields need fixing (retry, no probe), one whose model fails (``response.
failed``), and a probe that ran a cell and ended without a verdict. A change here changes what
the forms' pages and other clients read: it must be deliberate (rewrite the snapshot with
``WRITE_WIRE_SNAPSHOTS=1`` and say why in the commit). Ids that differ from run to run are
replaced by a placeholder."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from scratchpad.config import Settings
from scratchpad.connect import run_probe, stage
from scratchpad.connect.submissions import Submission
from scratchpad.llm.scripted import ScriptedProvider
from scratchpad.vault.store import Vault
from tests.connect.services import HTTP_CHECK, TOKEN, bearer_service, call, cell, http_form
from tests.server.test_wire_snapshots import check

IDS = (
    (re.compile(r"sub_[0-9a-f]+"), "<submission>"),
    (re.compile(r"fm_[0-9a-f]+"), "<form>"),
    (re.compile(r'"duration_s": [0-9.e-]+'), '"duration_s": <s>'),
)
SUCCESS = [call("report_success", summary="The service answered as alice.")]
REGION = {"name": "region", "label": "Region", "type": "text", "required": True}
MORE = [call("request_extra_field", reason="The service needs a region.", fields=[REGION])]


@pytest.fixture
def probe_settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", kernel_start_timeout_s=30.0, probe_timeout_s=60.0)


async def test_a_submissions_events_keep_their_bytes(probe_settings: Settings) -> None:
    vault = Vault(probe_settings, keyring=None)
    form = {"engine": "postgres", "title": "Postgres ü",
            "fields": [{"name": "host", "required": True}, {"name": "port"},
                       {"name": "password", "type": "password"}]}  # fmt: skip
    runs: list[tuple[Submission, list[Any]]] = [
        (stage(form, {"host": "db.internal", "port": "five", "password": "abc"}), []),
        (stage(http_form(), {"base_url": "http://127.0.0.1:9", "api_key": TOKEN}), []),
        (
            stage(http_form(), {"base_url": "http://127.0.0.1:9", "api_key": TOKEN}),
            [[cell("print('looked ü')")], "I looked."],
        ),
    ]
    with bearer_service() as url:
        runs += [
            (
                stage(http_form(), {"base_url": url, "api_key": TOKEN}),
                [[cell(HTTP_CHECK)], SUCCESS, "Done."],
            ),
            (stage(http_form(), {"base_url": url, "api_key": TOKEN}), [MORE, "More."]),
        ]
        lines = await _events(runs, vault, probe_settings)
    check("submission_events.txt", "\n".join(lines))


async def _events(
    runs: list[tuple[Submission, list[Any]]], vault: Vault, settings: Settings
) -> list[str]:
    """Each run's events, one a line, a blank line after each run."""
    lines = []
    for submission, turns in runs:
        provider = ScriptedProvider(turns)
        async for event in run_probe(submission, provider=provider, vault=vault, settings=settings):
            line = json.dumps(event, ensure_ascii=False)
            for pattern, placeholder in IDS:
                line = pattern.sub(placeholder, line)
            lines.append(line)
        lines.append("")
    return lines
