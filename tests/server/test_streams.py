"""execute-stream against a real ``scratchpad serve``: clients written elsewhere (aiohttp, as
Anton's remote client reads it), clients that go away, a server that stops or is killed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest

from scratchpad.isolation import cli_command
from tests.process_helpers import process_gone, processes_in
from tests.runtime.attacks import gone, processes_with
from tests.server_helpers import free_port, running_server, wait_healthy

KEY = "stream-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    with running_server(tmp_path / "home", tmp_path, KEY) as running:
        yield running


async def anton_frames(url: str, body: dict[str, Any]) -> AsyncGenerator[dict[str, Any], None]:
    """Frames the way Anton's RemoteScratchpadRuntime reads them: aiohttp, line by line
    (``async for`` over the body has aiohttp's 128 KiB line limit)."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/scratchpad/execute-stream", json=body, headers=HEADERS) as resp,
    ):
        assert resp.status == 200
        buffer = ""
        async for chunk in resp.content:
            buffer += chunk.decode("utf-8", errors="replace")
            while "\n\n" in buffer:
                event, buffer = buffer.split("\n\n", 1)
                for line in event.split("\n"):
                    if line.startswith("data: "):
                        yield json.loads(line[6:])


def cells_of(url: str, pad: str) -> list[dict[str, Any]]:
    return list(httpx.get(f"{url}/v1/pads/{pad}", headers=HEADERS, timeout=30).json()["cells"])


def wait_for_cells(url: str, pad: str, count: int, within_s: float = 30) -> list[dict[str, Any]]:
    deadline = time.monotonic() + within_s
    while len(cells := cells_of(url, pad)) < count:
        assert time.monotonic() < deadline, cells
        time.sleep(0.05)
    return cells


@pytest.mark.parametrize(
    ("code", "field"),
    [
        ("print('a' * 140_000)", "stdout"),
        ("import sys\nsys.stderr.write('\\x01' * 70_000)", "stderr"),  # 6 bytes each in JSON
        ("raise ValueError('e' * 200_000)", "error"),
        ("'r' * 90_000", "result"),
        ("1", "estimated_time"),
    ],
)
async def test_a_plain_client_never_gets_a_frame_over_64_kib(
    server: tuple[str, subprocess.Popen[str]], code: str, field: str
) -> None:
    url, _ = server
    body = {"name": "big", "code": code, "estimated_time": "\x01" * 100_000}
    frames = [f async for f in anton_frames(url, body)]
    cell = frames[-1]["cell"]
    assert len(json.dumps(frames[-1], ensure_ascii=False).encode()) < 64 * 1024
    assert "characters cut to fit the stream" in cell[field]
    assert f"/v1/pads/big/cells/{cell['id']}" in cell[field]
    async with httpx.AsyncClient(headers=HEADERS) as http:
        whole = (await http.get(f"{url}/v1/pads/big/cells/{cell['id']}")).json()
    assert len(whole[field]) > len(cell[field])  # the whole cell is where the note says


CUT_NOTE = re.compile(r"\n\[\.\.\. (\d+) characters cut to fit the stream; ([^\]]*) \.\.\.\]\n")


async def test_a_cut_field_has_one_note_with_the_true_count_and_where_the_text_is(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    code = "print('a' * (128*1024+1))\n" + "# the client's own code stays whole\n" * 500
    frames = [f async for f in anton_frames(url, {"name": "big", "code": code})]
    cell = frames[-1]["cell"]
    assert cell["code"] == code  # never cut: the client sent it
    notes = CUT_NOTE.findall(cell["stdout"])
    assert len(notes) == 1, cell["stdout"][:200]
    count, where = int(notes[0][0]), notes[0][1]
    assert where == f"the whole text: GET /v1/pads/big/cells/{cell['id']}/text?field=stdout"
    kept = len(CUT_NOTE.sub("", cell["stdout"]))
    assert kept + count == 128 * 1024 + 2  # every character is kept or counted
    async with httpx.AsyncClient(headers=HEADERS) as http:
        text = await http.get(f"{url}{where.split('GET ')[1]}", params={"length": 10**6})
    assert text.json()["total"] == 128 * 1024 + 2


async def test_code_too_long_for_the_frame_is_left_to_the_client(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    code = "x = 1\n" + "#" * 70_000
    frames = [f async for f in anton_frames(url, {"name": "big", "code": code})]
    assert frames[-1]["cell"]["status"] == "ok"
    assert "code" not in frames[-1]["cell"]  # Anton's client keeps the code it sent


async def test_a_client_that_goes_away_interrupts_its_cell_and_frees_the_pad(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    await _run(url, "kept = 'yes'")
    body = {"name": "p", "code": "import time\nprogress('started')\nwhile True: time.sleep(0.01)"}
    async with contextlib.aclosing(anton_frames(url, body)) as frames:
        async for frame in frames:
            assert frame == {"type": "progress", "message": "started"}
            break  # the user pressed Ctrl-C: Anton's client drops the connection, no /cancel
    cells = wait_for_cells(url, "p", 2, within_s=10)  # not the 120 s of the cell's timeout
    assert cells[-1]["status"] == "cancelled"
    assert cells[-1]["error"].startswith("Cell cancelled (interrupted; variables are kept)")
    assert await _run(url, "kept") == "'yes'"


async def test_a_client_may_ask_its_cell_to_continue_without_it(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    code = "import time\nprogress('started')\ntime.sleep(1)\n'finished'"
    body = {"name": "p", "code": code, "on_disconnect": "continue"}
    async with contextlib.aclosing(anton_frames(url, body)) as frames:
        async for _ in frames:
            break
    cell = wait_for_cells(url, "p", 1)[-1]
    assert (cell["status"], cell["result"]) == ("ok", "'finished'")


async def _run(url: str, code: str) -> str | None:
    frames = [f async for f in anton_frames(url, {"name": "p", "code": code})]
    return frames[-1]["cell"]["result"]  # type: ignore[no-any-return]


def test_stopping_the_server_ends_each_stream_with_a_final_frame(tmp_path: Path) -> None:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, process):
        body = {"name": "p", "code": "import time\nprogress('started')\ntime.sleep(60)"}
        with httpx.stream(
            "POST", f"{url}/scratchpad/execute-stream", headers=HEADERS, json=body, timeout=60
        ) as response:
            lines = response.iter_lines()
            assert next(line for line in lines if line.startswith("data: "))
            process.send_signal(signal.SIGTERM)
            final = json.loads(next(line for line in lines if line.startswith("data: "))[6:])
        assert final["type"] == "cell" and final["cell"]["status"] == "killed"
        assert final["cell"]["error"].startswith("Cell stopped: the server stopped while it ran")
        assert process.wait(timeout=30) in (0, -signal.SIGTERM)
        log = process.stdout.read() if process.stdout else ""
    assert "Traceback" not in log and "ERROR" not in log, log


def test_an_acknowledged_cell_survives_a_kill_of_the_server(tmp_path: Path) -> None:
    """The history record is written before the final frame goes out."""
    home = tmp_path / "home"
    acknowledged: list[str] = []
    for _ in range(3):
        with running_server(home, tmp_path, KEY) as (url, process):
            for _ in range(15):
                code = f"{len(acknowledged)} * 1"  # each cell its own code
                answer = httpx.post(
                    f"{url}/scratchpad/execute-stream",
                    headers=HEADERS,
                    json={"name": "p", "code": code},
                    timeout=30,
                )
                assert '"type": "cell"' in answer.text
                acknowledged.append(code)
            process.kill()  # at once after the last answer: no time for a delayed write
            process.wait()
    with running_server(home, tmp_path, KEY) as (url, _):
        recorded = {cell["code"] for cell in cells_of(url, "p")}
    assert set(acknowledged) <= recorded, sorted(set(acknowledged) - recorded)


def test_kernels_die_with_a_killed_server(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "SCRATCHPAD_HOME": str(tmp_path / "home"), "SCRATCHPAD_API_KEY": KEY}
    process = subprocess.Popen(
        cli_command("serve", "--port", str(port)),
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        body = {"name": "p", "code": "progress('running')\nwhile True: pass"}
        with httpx.stream(
            "POST", f"{url}/scratchpad/execute-stream", headers=HEADERS, json=body, timeout=30
        ) as response:
            next(line for line in response.iter_lines() if line.startswith("data: "))
            kernels = processes_in(tmp_path / "home" / "workspaces")  # the pad's, working there
            assert kernels
            process.kill()
    finally:
        process.kill()
        process.wait()
    deadline = time.monotonic() + 10
    while not all(process_gone(pid) for pid in kernels):
        assert time.monotonic() < deadline, "the kernel outlived its server"
        time.sleep(0.05)


def test_the_cell_url_of_a_name_with_a_slash(server: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = server
    name = "data/analysis"
    answer = httpx.post(
        f"{url}/scratchpad/execute-stream",
        headers=HEADERS,
        json={"name": name, "code": "6 * 7", "id": "answer"},
        timeout=30,
    )
    assert '"result": "42"' in answer.text
    assert cells_of(url, "data%2Fanalysis")[0]["result"] == "42"
    cell = httpx.get(f"{url}/v1/pads/data%2Fanalysis/cells/answer", headers=HEADERS).json()
    assert cell["result"] == "42"
    listed = httpx.get(f"{url}/v1/pads", headers=HEADERS).json()["pads"]
    assert [pad["name"] for pad in listed] == [name]
    assert httpx.get(f"{url}/v1/pads/data%2Fanalysis/dump", headers=HEADERS).status_code == 200


async def test_a_repeated_request_that_goes_away_does_not_cancel_the_cell(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    code = "import time\nprogress('started')\ntime.sleep(1.5)\n'finished'"
    body = {"name": "p", "code": code, "id": "shared", "on_disconnect": "continue"}
    owner = anton_frames(url, body)
    assert await anext(owner) == {"type": "progress", "message": "started"}
    async with contextlib.aclosing(
        anton_frames(url, {**body, "on_disconnect": "interrupt"})
    ) as repeat:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.3):
                async for _ in repeat:
                    pass
    frames = [frame async for frame in owner]  # the repeat went away: the cell goes on
    assert frames[-1]["cell"]["status"] == "ok" and frames[-1]["cell"]["result"] == "'finished'"


def test_a_new_server_stops_what_a_killed_one_left_behind(tmp_path: Path) -> None:
    """A daemon a cell started (its own session) outlives neither a server killed with
    SIGKILL nor, at the latest, the start of the next server (where no PID namespace holds a
    pad's processes, the next server finds them by their tag)."""
    home = tmp_path / "home"
    token = f"300{os.getpid()}.5"
    code = f"import subprocess\nsubprocess.Popen(['sleep', '{token}'], start_new_session=True)"
    with running_server(home, tmp_path, KEY) as (url, process):
        answer = httpx.post(
            f"{url}/scratchpad/execute-stream",
            headers=HEADERS,
            json={"name": "p", "code": code},
            timeout=30,
        )
        assert '"status": "ok"' in answer.text
        assert processes_with(token)
        process.kill()  # no chance to stop its pads
        process.wait()
    try:
        with running_server(home, tmp_path, KEY):
            assert asyncio.run(gone(token)) == [], "the daemon outlived two servers"
    finally:
        for pid in processes_with(token):
            os.kill(pid, signal.SIGKILL)
