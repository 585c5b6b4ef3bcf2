"""Careless cells in real pads leak no form of a secret of the vault or the workspace .env, on
any way out: the streamed items, the pad's history file, view / dump / .ipynb, MCP answers,
the observation store, and over a real server its answers, the pad feed and its log.

Each careless cell of :mod:`tests.scrub.careless` prints one form of one secret; a secret used
as a cell id is refused; images lose their PNG text chunks and stay valid.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.cell import Cell
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.mcp_server import create_mcp_server
from scratchpad.vault import Vault
from tests.scrub.careless import (
    CELLS,
    ENV_FILE,
    ENV_PLAIN,
    ENV_SECRETS,
    OUTPUT_CAP,
    PRELUDE,
    TOKEN_VAR,
    VAULT_FIELDS,
    VAULT_SECRET_FIELDS,
)
from tests.scrub.corpus import CONTROL_LINES, streamed
from tests.server_helpers import running_server

KEY = "careless-server-key"
SECRET_ID = ENV_SECRETS["MYSQL_PWD"]  # letters, digits and "_": shaped like a cell id
CONTROL = (
    "print(os.environ['MODE'], os.environ['HOST'])\nprint(" + repr("\n".join(CONTROL_LINES)) + ")"
)
CONTROL_TEXT = " ".join(ENV_PLAIN.values()) + "\n" + "\n".join(CONTROL_LINES) + "\n"
PNG_BASE64 = re.compile(r"iVBORw0KGgo[A-Za-z0-9+/=]+")
WITHIN_S = 60.0


def fill_home(home: Path) -> None:
    """A vault connection and a workspace .env, as a person would leave them."""
    Vault(Settings(home=home), keyring=None).save(
        "postgres", "prod", VAULT_FIELDS, secure_keys=VAULT_SECRET_FIELDS
    )
    (home / ".env").write_text(ENV_FILE)


def leaks(sinks: dict[str, str]) -> dict[str, list[str]]:
    """Form → the sinks in which one of its probes appears."""
    found: dict[str, list[str]] = {}
    for cell in CELLS:
        where = [sink for sink, text in sinks.items() if any(p in text for p in cell.probes)]
        if where:
            found[cell.form] = where
    if any(SECRET_ID in text for text in sinks.values()):
        found.setdefault("secret as a cell id", []).extend(
            sink for sink, text in sinks.items() if SECRET_ID in text
        )
    return found


def png_problems(sinks: dict[str, str]) -> list[str]:
    """Every PNG in the sinks that still carries a text chunk or is no valid PNG."""
    problems = []
    for sink, text in sinks.items():
        for encoded in PNG_BASE64.findall(text.replace("\\n", "")):
            chunks = png_chunks(base64.b64decode(encoded + "=" * (-len(encoded) % 4)))
            kinds = [kind for kind, _ in chunks]
            if not kinds or kinds[0] != b"IHDR" or kinds[-1] != b"IEND":
                problems.append(f"{sink}: not a valid PNG ({kinds})")
            elif {b"tEXt", b"zTXt", b"iTXt"} & set(kinds):
                problems.append(f"{sink}: text chunks {kinds}")
            else:
                pixels = zlib.decompress(b"".join(data for kind, data in chunks if kind == b"IDAT"))
                assert pixels == b"\0\xff\x00\x00", sink  # the one red pixel, intact
    return problems


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """(kind, data) of each chunk whose CRC holds; [] when the signature is wrong."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return []
    chunks: list[tuple[bytes, bytes]] = []
    position = 8
    while position + 12 <= len(data):
        (length,) = struct.unpack_from(">I", data, position)
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if position + 12 + length > len(data):
            return [*chunks, (b"cut short", b"")]
        (crc,) = struct.unpack_from(">I", data, position + 8 + length)
        if zlib.crc32(kind + body) != crc:
            return [*chunks, (b"bad CRC", b"")]
        chunks.append((kind, body))
        position += 12 + length
    return chunks


def stored_text(home: Path) -> str:
    """What the home stores of the pads' output: histories and the observation store."""
    paths = [*home.glob("pads/*/history.jsonl"), *home.glob("observations.db*")]
    return "\n".join(path.read_bytes().decode("utf-8", "replace") for path in sorted(paths))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        home=tmp_path / "home",
        output_cap_bytes=OUTPUT_CAP,
        observation_threshold_bytes=0,  # every cell result to the model goes to the store
        interrupt_grace_s=1.0,
        kernel_start_timeout_s=20.0,
    )


async def test_no_careless_cell_leaks_from_a_local_pad(workspace: Path, settings: Settings) -> None:
    home = workspace / ".scratchpad"
    fill_home(home)
    sinks: dict[str, str] = {}
    async with ScratchpadManager(workspace=workspace, settings=settings) as manager:
        pad = await manager.get_or_create("careless")
        assert (await pad.execute(PRELUDE)).ok
        items = []
        for cell in CELLS:
            items += [item async for item in pad.execute_streaming(cell.code)]
        control = await pad.execute(CONTROL)
        try:
            accepted = await pad.execute("1 + 1", cell_id=SECRET_ID)
            sinks["cell id error"] = f"accepted: {accepted.to_dict()}"
        except InvalidInputError as exc:
            sinks["cell id error"] = str(exc)
        sinks["stream"] = streamed(items)
        sinks["view"] = pad.view()
        sinks["dump"] = pad.dump()
        sinks["ipynb"] = json.dumps(pad.to_ipynb())
        sinks.update(await mcp_answers(manager, settings))
        assert control.stdout == CONTROL_TEXT  # ordinary text and plain settings pass
    sinks["history and store"] = stored_text(home)
    found = leaks(sinks)
    assert not found, "\n".join(f"{form} leaked to {where}" for form, where in found.items())
    assert png_problems(sinks) == []
    assert all(PNG_BASE64.search(sinks[sink]) for sink in ("stream", "ipynb", "mcp answers"))
    recorded = {item.code: item for item in items if isinstance(item, Cell)}
    int_error = next(cell for code, cell in recorded.items() if code.startswith("int("))
    assert f"[{TOKEN_VAR}]" in (int_error.error or "")  # the quoted prefix, labelled
    assert "[MYSQL_PWD]" in sinks["cell id error"]


async def mcp_answers(manager: ScratchpadManager, settings: Settings) -> dict[str, str]:
    """The MCP scratchpad tool's answers (and progress) for every careless cell, and the
    observations they were offloaded to."""
    told: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        told.append(message or "")

    answers = []
    with ObservationStore(settings=settings) as store:
        async with Client(create_mcp_server(manager, store)) as client:
            for code in [PRELUDE, *(cell.code for cell in CELLS)]:
                arguments = {"action": "exec", "name": "mcp", "code": code}
                result = await client.call_tool(
                    "scratchpad", arguments, progress_callback=on_progress
                )
                answers.append(json.dumps(result.model_dump(mode="json")))
            refused = await client.call_tool(
                "scratchpad", {"action": "exec", "name": "mcp", "code": "1", "cell_id": SECRET_ID}
            )
        stored = [store.get(entry.id).content for entry in store.list_all()]
    return {
        "mcp answers": "\n".join(answers),
        "mcp progress": "\n".join(told),
        "mcp cell id error": "\n".join(
            c.text for c in refused.content if isinstance(c, types.TextContent)
        ),
        "observations": "\n".join(str(content) for content in stored),
    }


async def test_no_careless_cell_leaks_through_a_real_server(tmp_path: Path) -> None:
    home = tmp_path / "server-home"
    fill_home(home)
    env = {"SCRATCHPAD_OUTPUT_CAP_BYTES": str(OUTPUT_CAP)}
    with running_server(home, tmp_path, KEY, env) as (url, process):
        async with httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=WITHIN_S
        ) as http:
            sinks = await talk_to(http)
        process.terminate()
        sinks["server log"] = process.communicate(timeout=30)[0]
    sinks["history and store"] = stored_text(home)
    found = leaks(sinks)
    assert not found, "\n".join(f"{form} leaked to {where}" for form, where in found.items())
    assert png_problems(sinks) == []
    assert all(PNG_BASE64.search(sinks[sink]) for sink in ("sse", "feed", "notebook"))
    assert sinks["statuses"] == "400 400"  # a secret as a cell id is refused, run or looked up


async def talk_to(http: httpx.AsyncClient) -> dict[str, str]:
    """Every careless cell run over the remote-backend protocol while a feed watches."""
    answers, frames = [], []
    async with http.stream("GET", "/v1/pads/careless/events") as feed:
        lines = feed.aiter_lines()
        for code in [PRELUDE, *(cell.code for cell in CELLS)]:
            body = {"name": "careless", "code": code, "stream_output": True}
            answer = await http.post("/scratchpad/execute-stream", json=body)
            assert answer.status_code == 200, answer.text
            answers.append(answer.text)
            frames += await until_recorded(lines)
    refused = await http.post(
        "/scratchpad/execute-stream", json={"name": "careless", "code": "1", "id": SECRET_ID}
    )
    unknown = await http.get(f"/v1/pads/careless/cells/{SECRET_ID}")  # its path is logged
    statuses = f"{refused.status_code} {unknown.status_code}"
    return {
        "sse": "\n".join(answers),
        "feed": "\n".join(frames),
        "dump": (await http.get("/v1/pads/careless/dump")).text,
        "notebook": (await http.get("/v1/pads/careless/notebook")).text,
        "errors": refused.text + unknown.text,
        "statuses": statuses,
    }


async def until_recorded(lines: Any) -> list[str]:
    """The feed's data lines up to the next recorded cell."""
    seen = []
    async with asyncio.timeout(WITHIN_S):
        async for line in lines:
            if line.startswith("data: "):
                seen.append(line)
                if json.loads(line[6:])["type"] == "cell":
                    return seen
    raise AssertionError("the feed ended")


LOG_SCRIPT = """
import contextlib, io, json, logging, os, sys
from scratchpad.config import Settings
from scratchpad.scrub import scrub_logs
from scratchpad.vault import Vault

vault = Vault(Settings(home=sys.argv[1]), keyring=None)
vault.prime()  # as a server does at start: every secret registered
os.environ.update({**vault.workspace_env(), **vault.env_for("postgres", "prod")})
scrub_logs()
logging.basicConfig(level=logging.INFO, stream=sys.stdout)
log = logging.getLogger("cells")
namespace = {
    "progress": lambda message: log.info("progress: %s", message),
    "display": lambda shown: log.info("display: %r", shown),
}
for code in json.load(sys.stdin):
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(code, namespace)
    except Exception:
        log.exception("the cell failed")
    log.info("the cell printed: %s", printed.getvalue())
"""


def test_log_records_of_careless_output_are_scrubbed(tmp_path: Path) -> None:
    """Every careless cell's output (printed, raised, reported) as a log record of a process
    that registered the home's secrets: the records are scrubbed whichever form they hold."""
    home = tmp_path / "home"
    fill_home(home)
    codes = [PRELUDE, *(cell.code for cell in CELLS)]
    done = subprocess.run(
        [sys.executable, "-c", LOG_SCRIPT, str(home)],
        input=json.dumps(codes),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found = leaks({"log": done.stdout + done.stderr})
    assert not found, found
    assert "the cell failed" in done.stdout and f"[{TOKEN_VAR}]" in done.stdout


def test_the_probes_are_what_the_cells_print() -> None:
    """The corpus checks itself: every probe is text a cell would print unscrubbed."""
    assert all(cell.probes and all(len(p) >= 8 for p in cell.probes) for cell in CELLS)
    assert len({cell.form for cell in CELLS}) == len(CELLS)
