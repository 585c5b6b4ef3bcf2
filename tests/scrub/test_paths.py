"""The scrubber's corpus through every path out: no secret form leaks, ordinary text passes.

Paths: a cell's fields and its live stream, the pad's history file, view / dump / .ipynb, the
model's tool result (through a session) with the session history and episodic log, the
observation store, SSE of a real server (plain and streaming clients), the stored cell and
dump over HTTP, MCP tool results and progress, and the server's own log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client

from scratchpad.agent.session import Session
from scratchpad.config import Settings
from scratchpad.llm import ScriptedProvider, TextBlock, ToolCall, ToolResultBlock
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.cell import Cell, OutputEvent
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.scrub import scrubber
from scratchpad.server.mcp_server import create_mcp_server
from tests.scrub.corpus import (
    CONTROL_CELL,
    CONTROL_LINES,
    SECRETS,
    everything_in,
    leaks,
    secret_cell,
    streamed,
)
from tests.server_helpers import running_server

KEY = "corpus-server-key"


@pytest.fixture(autouse=True)
def known_secrets() -> None:
    scrubber().add_many(dict((value, name) for name, value in SECRETS.items()))


@pytest.fixture
async def pads(manager: ScratchpadManager) -> AsyncIterator[ScratchpadManager]:
    yield manager


async def test_no_form_of_a_secret_leaks_from_a_local_pad(
    pads: ScratchpadManager, settings: Settings
) -> None:
    pad = await pads.get_or_create("corpus")
    items = [item async for item in pad.execute_streaming(secret_cell())]
    cell = items[-1]
    assert isinstance(cell, Cell)
    assert cell.status == "ok", cell.error
    failed = await pad.execute(secret_cell(fail=True))
    assert failed.status == "error" and "RuntimeError" in (failed.error or "")
    outputs = {
        "stream": streamed(items),
        "cell": json.dumps(cell.to_dict()),
        "failed cell": json.dumps(failed.to_dict()),
        "view": pad.view(),
        "dump": pad.dump(),
        "ipynb": json.dumps(pad.to_ipynb()),
        "files": everything_in(settings.home),
    }
    found = {path: leaks(text) for path, text in outputs.items()}
    assert found == {path: [] for path in outputs}
    assert "[DS_POSTGRES_PROD__PASSWORD]" in cell.stdout
    assert "[DS_SSH_DEPLOY__PRIVATE_KEY]" in cell.stdout
    assert "[REDACTED]" in cell.stdout  # the unknown keys, caught by shape
    assert "split:[DS_HTTP_BILLING__TOKEN]" in cell.stdout


async def test_ordinary_text_passes_every_path_unchanged(pads: ScratchpadManager) -> None:
    pad = await pads.get_or_create("control")
    items = [item async for item in pad.execute_streaming(CONTROL_CELL)]
    cell = items[-1]
    assert isinstance(cell, Cell)
    expected = "\n".join(CONTROL_LINES) + "\n"
    assert cell.stdout == expected
    assert "".join(i.text for i in items if isinstance(i, OutputEvent)) == expected
    assert expected in pad.dump()
    store_text = scrubber().scrub(expected)
    assert store_text == expected


async def test_the_model_the_session_files_and_the_store_see_no_secret(
    pads: ScratchpadManager, settings: Settings, tmp_path: Path
) -> None:
    call = ToolCall("scratchpad", {"action": "exec", "name": "m", "code": secret_cell()})
    provider = ScriptedProvider([[call], "Done."])
    with ObservationStore(tmp_path / "obs.db", settings=settings) as store:
        session = Session(provider=provider, manager=pads, store=store, session_id="corpus")
        await session.turn("connect")
        raw = "\n".join([*SECRETS.values(), "sk-ant-api03-Zx81kQmP0vR2sT4uW6yA8cE0gI2kM4oQ6sU8wY0"])
        entry = store.put(raw * 200, turn_id="t", tool="shell")
        stored = store.get(entry).content
    assert isinstance(stored, str)
    outputs = {
        "tool results to the model": "\n".join(
            part.text
            for message in session.history
            for block in message.content
            if isinstance(block, ToolResultBlock)
            for part in block.content
            if isinstance(part, TextBlock)
        ),
        "session files": everything_in(settings.home / "sessions"),
        "observation": stored,
        "observation db": (tmp_path / "obs.db").read_bytes().decode("utf-8", "replace"),
    }
    assert {path: leaks(text) for path, text in outputs.items()} == {p: [] for p in outputs}
    assert "[DS_POSTGRES_PROD__PASSWORD]" in outputs["tool results to the model"]


async def test_mcp_results_and_progress_carry_no_secret(
    settings: Settings, workspace: Path
) -> None:
    told: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        told.append(message or "")

    async with (
        ScratchpadManager(workspace=workspace, settings=settings) as manager,
        Client(create_mcp_server(manager)) as client,
    ):
        arguments = {"action": "exec", "name": "p", "code": secret_cell()}
        result = await client.call_tool("scratchpad", arguments, progress_callback=on_progress)
    text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
    assert told and "[DS_POSTGRES_PROD__PASSWORD]" in told[0]
    assert leaks(text) == [] and leaks("\n".join(told)) == []


def test_a_real_server_leaks_nothing_over_sse_http_or_its_log(
    tmp_path: Path, workspace: Path
) -> None:
    home = tmp_path / "server-home"
    names = {f"CORPUS_{name}": value for name, value in SECRETS.items()}  # secret-named vars
    os.environ.update(names)
    try:
        with running_server(home, workspace, KEY) as (url, process):
            outputs = _talk_to(url)
            process.terminate()
            log, _ = process.communicate(timeout=30)
    finally:
        for name in names:
            del os.environ[name]
    outputs["server log"] = log
    outputs["files"] = everything_in(home)
    assert {path: leaks(text) for path, text in outputs.items()} == {p: [] for p in outputs}
    assert "CORPUS_DS_POSTGRES_PROD__PASSWORD" in outputs["sse (stream_output)"]


def _talk_to(url: str) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {KEY}"}
    outputs = {}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        for stream_output in (False, True):
            body: dict[str, Any] = {"name": "srv", "code": secret_cell(), "description": "c"}
            body.update(stream_output=stream_output, id=f"c{int(stream_output)}")
            answer = http.post("/scratchpad/execute-stream", json=body)
            assert answer.status_code == 200 and '"type": "cell"' in answer.text.replace(
                '"type":"cell"', '"type": "cell"'
            )
            outputs["sse (stream_output)" if stream_output else "sse"] = answer.text
        outputs["stored cell"] = http.get("/v1/pads/srv/cells/c1").text
        outputs["dump"] = http.get("/v1/pads/srv/dump").text
        outputs["notebook"] = http.get("/v1/pads/srv/notebook").text
        secret = SECRETS["DS_HTTP_BILLING__TOKEN"]
        outputs["error answer"] = http.get(f"/v1/pads/{secret}").text  # logged with its path
    return outputs


def test_server_log_records_are_scrubbed(tmp_path: Path) -> None:
    """Whatever handler writes them: the record is scrubbed when it is made."""
    script = (
        "import logging, sys\n"
        "from scratchpad.scrub import scrub_logs, scrubber\n"
        "scrubber().add(sys.argv[1], 'DS_X__TOKEN')\n"
        "scrub_logs()\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "logging.getLogger('a').info('connecting with %s', sys.argv[1])\n"
        "try:\n"
        "    raise ValueError(sys.argv[1])\n"
        "except ValueError:\n"
        "    logging.getLogger('b').exception('failed')\n"
    )
    secret = SECRETS["DS_HTTP_BILLING__TOKEN"]
    done = subprocess.run(
        [sys.executable, "-c", script, secret],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "connecting with [DS_X__TOKEN]" in done.stderr
    assert "ValueError: [DS_X__TOKEN]" in done.stderr
    assert secret not in done.stderr


SVG_CELL = """
token = "tok_9f8e7d6c5b4a3210fedcba98"

class Shown:
    def _repr_mimebundle_(self, *args, **kwargs):
        return {
            "image/svg+xml": "<svg><text>" + token + "</text></svg>",
            "image/x-" + token: "AAAA",
            "text/html": "<b>" + token + "</b>",
        }

display(Shown())
"""


async def test_text_images_and_mime_names_of_a_display_are_scrubbed(
    pads: ScratchpadManager,
) -> None:
    pad = await pads.get_or_create("svg")
    cell = await pad.execute(SVG_CELL)
    assert cell.status == "ok", cell.error
    outputs = {
        "cell": json.dumps(cell.to_dict()),
        "dump": pad.dump(),
        "ipynb": json.dumps(pad.to_ipynb()),
    }
    found = {path: leaks(text) for path, text in outputs.items()}
    assert found == {path: [] for path in outputs}
    bundle = cell.outputs[0]
    assert bundle["image/svg+xml"] == "<svg><text>[DS_HTTP_BILLING__TOKEN]</text></svg>"
    assert "image/x-[DS_HTTP_BILLING__TOKEN]" in bundle
