"""A server restart, with a real ``scratchpad serve`` on the same home: after a ``kill -9``
and after a graceful stop, every pad comes back asleep with its history and its cells' ids,
and its first cell restores its variables, saying which (and why one was not); a graceful
stop saves what a cell's thread changed after the last cell; two clients waking a pad at
once get one kernel."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import httpx

from tests.server.test_pad_feed import run_cell
from tests.server_helpers import running_server

KEY = "restart-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}
WITHIN_S = 60.0
FIRST = "import socket\nx = [1, 2]\nconn = socket.socket()"  # conn: never saved
SECOND = "y = x + [3]"
CHECK = "(x, y, 'conn' in dir(), socket.__name__)"


def run(url: str, pad: str, code: str) -> dict[str, Any]:
    """Run a cell over HTTP (execute-stream); its final frame's cell."""
    answer = httpx.post(
        f"{url}/scratchpad/execute-stream",
        headers=HEADERS,
        json={"name": pad, "code": code},
        timeout=WITHIN_S,
    )
    assert answer.status_code == 200, answer.text
    final = json.loads(answer.text.strip().split("\n\n")[-1].removeprefix("data: "))
    assert final["type"] == "cell", final
    return dict(final["cell"])


def saved(home: Path, pad: str, number: int) -> None:
    """Until the checkpoint after cell ``number`` is on disk (the kernel writes it on a
    thread of its own, after the cell's answer)."""
    head = home / "pads" / pad / "checkpoint" / "HEAD"
    deadline = time.monotonic() + WITHIN_S
    while not (head.is_file() and head.read_text() == str(number)):
        assert time.monotonic() < deadline, f"no checkpoint after cell {number}"
        time.sleep(0.02)


def listed(url: str) -> dict[str, dict[str, Any]]:
    answer = httpx.get(f"{url}/v1/pads", headers=HEADERS, timeout=WITHIN_S)
    assert answer.status_code == 200, answer.text
    return {pad["name"]: pad for pad in answer.json()["pads"]}


def cell_ids(url: str, pad: str) -> list[str]:
    answer = httpx.get(f"{url}/v1/pads/{pad}", headers=HEADERS, timeout=WITHIN_S)
    assert answer.status_code == 200, answer.text
    return [cell["id"] for cell in answer.json()["cells"]]


def two_cells(url: str, home: Path) -> list[str]:
    """The first server's work: two cells of pad ``p``, both checkpointed; their ids."""
    first, second = run(url, "p", FIRST), run(url, "p", SECOND)
    assert (first["status"], second["status"]) == ("ok", "ok"), (first, second)
    assert "conn: not saved (open socket)" in first["logs"]
    saved(home, "p", 2)
    return [first["id"], second["id"]]


def assert_restored(url: str, ids: list[str]) -> dict[str, Any]:
    """The second server's view: ``p`` asleep with its history; its first cell restores."""
    line = listed(url)["p"]
    assert (line["status"], line["cells"]) == ("asleep", 2), line
    assert cell_ids(url, "p") == ids
    after = run(url, "p", CHECK)
    assert after["status"] == "ok", after
    assert after["result"] == "([1, 2], [1, 2, 3], False, 'socket')"
    logs = after["logs"]
    assert "It restored the variables saved after cell 2." in logs, logs
    assert "Restored: x, y." in logs and "Imports replayed: socket." in logs, logs
    assert "conn (never saved: open socket; defined in cell 1: re-run it)" in logs, logs
    assert cell_ids(url, "p") == [*ids, after["id"]]
    return after


def test_after_a_kill_9_pads_come_back_asleep_and_restore_their_variables(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    with running_server(home, tmp_path, KEY) as (url, process):
        ids = two_cells(url, home)
        process.kill()  # SIGKILL: no shutdown, no sweep
        process.wait()
    with running_server(home, tmp_path, KEY) as (url, _):
        after = assert_restored(url, ids)
        assert "The kernel stopped with its pad (closed, or the server stopped)" in after["logs"]


BACKGROUND = (
    "import threading, time\n"
    "def later():\n"
    "    time.sleep(0.2)\n"
    "    box.append('after the cell')\n"
    "    open('mutated', 'w').close()\n"
    "threading.Thread(target=later).start()"
)


def test_a_graceful_stop_saves_what_changed_after_the_last_cell(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with running_server(home, tmp_path, KEY) as (url, process):
        ids = two_cells(url, home)
        third = run(url, "p", "box = []\n" + BACKGROUND)  # box saved empty with the cell
        assert third["status"] == "ok", third
        ids.append(third["id"])
        saved(home, "p", 3)
        marker = next((home / "workspaces").glob("*/mutated"), None)
        deadline = time.monotonic() + WITHIN_S
        while marker is None:  # the thread changed box in place, after the cell's checkpoint
            assert time.monotonic() < deadline
            time.sleep(0.02)
            marker = next((home / "workspaces").glob("*/mutated"), None)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=WITHIN_S) in (0, -signal.SIGTERM)
    with running_server(home, tmp_path, KEY) as (url, _):
        line = listed(url)["p"]
        assert (line["status"], line["cells"]) == ("asleep", 3), line
        assert cell_ids(url, "p") == ids
        after = run(url, "p", "box")
        assert after["result"] == "['after the cell']", after  # only the stop's sweep saw it
        assert "It restored the variables saved after cell 3." in after["logs"], after["logs"]
        restored = after["logs"].split("Restored: ")[1].split(".")[0].split(", ")
        assert {"box", "x", "y"} <= set(restored), after["logs"]


def generation(home: Path, pad: str) -> int:
    return int(json.loads((home / "pads" / pad / "state.json").read_text())["generation"])


def test_two_clients_waking_a_pad_after_a_restart_get_one_kernel(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with running_server(home, tmp_path, KEY) as (url, process):
        assert run(url, "p", "x = 41")["status"] == "ok"
        saved(home, "p", 1)
        process.kill()
        process.wait()
    assert generation(home, "p") == 1
    with running_server(home, tmp_path, KEY) as (url, _):
        assert listed(url)["p"]["status"] == "asleep"
        # The kernel's pid (in a PID namespace two kernels may share one) and a token the
        # first cell of a kernel draws: the same in both cells only if one kernel ran them.
        code = "import os, uuid\ntoken = globals().get('token') or uuid.uuid4().hex\n"
        code += "(x + 1, os.getpid(), token)"

        async def both() -> list[dict[str, Any]]:
            async with (
                httpx.AsyncClient(headers=HEADERS, timeout=WITHIN_S) as one,
                httpx.AsyncClient(headers=HEADERS, timeout=WITHIN_S) as two,
            ):
                return list(
                    await asyncio.gather(
                        run_cell(one, url, {"name": "p", "code": code}),
                        run_cell(two, url, {"name": "p", "code": code}),
                    )
                )

        cells = [final["cell"] for final in asyncio.run(both())]
        assert [cell["status"] for cell in cells] == ["ok", "ok"], cells
        assert cells[0]["result"] == cells[1]["result"], cells  # one kernel: same pid, token
        assert cells[0]["result"].startswith("(42, ")
        assert sum("It restored the variables" in cell["logs"] for cell in cells) == 1
        assert generation(home, "p") == 2  # one kernel started since the restart
        assert listed(url)["p"]["status"] == "idle"
