"""Detached cells against a real ``scratchpad serve``: submit, leave, come back by id; resume a
dropped stream; idempotent submits; the generation fence; a server killed mid-cell."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.process_helpers import processes_in
from tests.server_helpers import running_server

KEY = "detached-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    with running_server(tmp_path / "home", tmp_path, KEY) as running:
        yield running


def submit(url: str, pad: str, code: str, **more: Any) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/pads/{pad}/cells", headers=HEADERS, json={"code": code, **more}, timeout=60
    )


def events(
    url: str, pad: str, cell_id: str, *, last: str | None = None, stop_after: int | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """(id, data) of the cell's event stream; ``stop_after``: the client goes away then."""
    headers = {**HEADERS, **({"Last-Event-ID": last} if last else {})}
    got: list[tuple[str, dict[str, Any]]] = []
    event_id = ""
    with httpx.stream(
        "GET", f"{url}/v1/pads/{pad}/cells/{cell_id}/events", headers=headers, timeout=60
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                got.append((event_id, json.loads(line[6:])))
                if stop_after is not None and len(got) >= stop_after:
                    break
    return got


def wait_status(url: str, pad: str, cell_id: str, wanted: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        answer = httpx.get(f"{url}/v1/pads/{pad}/cells/{cell_id}", headers=HEADERS, timeout=30)
        if answer.status_code == 200 and answer.json()["status"] in wanted:
            return dict(answer.json())
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.05)


def run(url: str, pad: str, code: str) -> dict[str, Any]:
    answer = submit(url, pad, code)
    assert answer.status_code == 202, answer.text
    return wait_status(url, pad, answer.json()["id"], {"ok", "error", "killed", "cancelled"})


COUNTED = "with open('count.txt', 'a') as f:\n    f.write('x')\n"


def test_a_submitted_cell_answers_202_and_is_followed_by_id(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    code = "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)\n'done'"
    answer = submit(url, "p", code, id="first-cell")
    assert answer.status_code == 202, answer.text
    assert answer.json()["id"] == "first-cell"
    assert answer.json()["status"] in ("queued", "running")
    assert answer.headers["location"] == "/v1/pads/p/cells/first-cell"
    got = events(url, "p", "first-cell")  # nobody followed it so far: it runs anyway
    assert [i for i, _ in got] == [f"first-cell:{n}" for n in range(1, len(got) + 1)]
    assert got[-1][1]["type"] == "cell" and got[-1][1]["cell"]["result"] == "'done'"
    printed = "".join(d["text"] for _, d in got if d["type"] == "output")
    assert printed == "0\n1\n2\n"
    assert wait_status(url, "p", "first-cell", {"ok"})["result"] == "'done'"
    listed = httpx.get(f"{url}/v1/pads/p/cells?status=recent", headers=HEADERS).json()
    assert [c["id"] for c in listed["cells"]] == ["first-cell"]


def test_a_dropped_stream_resumed_with_last_event_id_misses_nothing_and_repeats_nothing(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    code = "import time\nfor i in range(30):\n    print(i, flush=True)\n    time.sleep(0.03)"
    cell_id = submit(url, "p", code).json()["id"]
    first = events(url, "p", cell_id, stop_after=5)  # the connection drops mid-cell
    assert first[-1][1]["type"] != "cell"
    rest = events(url, "p", cell_id, last=first[-1][0])
    whole = events(url, "p", cell_id)  # the stream a client that never dropped got
    assert first + rest == whole
    printed = "".join(d["text"] for _, d in whole if d["type"] == "output")
    assert printed == "".join(f"{i}\n" for i in range(30))


def test_a_client_the_journal_moved_past_gets_a_resync(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    cell = run(url, "p", "for i in range(5000):\n    progress(str(i))\n'end'")
    got = events(url, "p", cell["id"], last=f"{cell['id']}:1")
    assert [d["type"] for _, d in got] == ["resync"]  # the record: the stream ends
    assert got[0][1]["cell"]["result"] == "'end'"
    assert got[0][0] == f"{cell['id']}:{got[0][1]['seq']}"


def test_the_same_id_with_the_same_payload_runs_once_and_other_code_is_refused(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    for _ in range(3):
        assert submit(url, "p", COUNTED, id="once").status_code == 202
    wait_status(url, "p", "once", {"ok"})
    assert submit(url, "p", COUNTED, id="once").json()["status"] == "ok"
    other = submit(url, "p", "1 + 1", id="once")
    assert other.status_code == 422, other.text
    assert other.json()["type"] == "CellIdReusedError"
    assert "already names a cell" in other.json()["error"]
    assert run(url, "p", "open('count.txt').read()")["result"] == "'x'"


def test_two_racing_submits_of_one_id_run_it_once(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    statuses: list[int] = []

    def race() -> None:
        statuses.append(submit(url, "race", COUNTED, id="r").status_code)

    threads = [threading.Thread(target=race) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 202 in statuses and set(statuses) <= {202, 409}, statuses
    wait_status(url, "race", "r", {"ok"})
    assert run(url, "race", "open('count.txt').read()")["result"] == "'x'"


def test_a_killed_kernel_ends_its_stream_with_the_runtimes_record(
    server: tuple[str, subprocess.Popen[str]], tmp_path: Path
) -> None:
    url, _ = server
    code = "import time\nprint('running', flush=True)\ntime.sleep(60)"
    victim = submit(url, "p", code).json()["id"]
    successor = submit(url, "p", "print('successor')").json()["id"]
    got: list[dict[str, Any]] = []
    with httpx.stream(
        "GET", f"{url}/v1/pads/p/cells/{victim}/events", headers=HEADERS, timeout=60
    ) as response:
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            got.append(json.loads(line[6:]))
            if got[-1]["type"] == "output":  # the kernel dies mid-cell
                for pid in processes_in(tmp_path / "home" / "workspaces"):
                    os.kill(pid, signal.SIGKILL)
    assert got[-1]["type"] == "cell"
    assert got[-1]["cell"]["id"] == victim and got[-1]["cell"]["status"] in ("killed", "error")
    assert "successor" not in json.dumps(got)
    assert {frame["gen"] for frame in got} == {got[0]["gen"]}
    assert wait_status(url, "p", successor, {"ok"})["stdout"] == "successor\n"


def test_a_cell_of_a_killed_server_answers_killed_and_never_runs_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code = COUNTED + "import time\nprint('counted', flush=True)\ntime.sleep(60)"
    with running_server(home, tmp_path, KEY) as (url, process):
        assert submit(url, "p", code, id="long").status_code == 202
        deadline = time.monotonic() + 30
        while "counted" not in wait_status(url, "p", "long", {"running"})["stdout"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        body = {"name": "q", "code": "import time\ntime.sleep(60)", "id": "streamed"}
        with httpx.stream(  # a detached cell of execute-stream, left running
            "POST",
            f"{url}/scratchpad/execute-stream",
            headers=HEADERS,
            json={**body, "on_disconnect": "continue"},
            timeout=30,
        ):
            wait_status(url, "q", "streamed", {"running"})
        while not any(b"streamed" in f.read_bytes() for f in home.glob("pads/*/accepted.jsonl")):
            assert time.monotonic() < deadline  # its entry follows its queueing at once
            time.sleep(0.05)
        process.kill()
        process.wait()
    with running_server(home, tmp_path, KEY) as (url, _):
        cell = httpx.get(f"{url}/v1/pads/p/cells/long", headers=HEADERS).json()
        assert cell["status"] == "killed", cell
        assert "not run again" in cell["error"]
        again = submit(url, "p", code, id="long")
        assert again.status_code == 202 and again.json()["status"] == "killed"
        got = events(url, "p", "long")
        assert [d["type"] for _, d in got] == ["resync"]
        assert got[0][1]["cell"]["status"] == "killed"
        assert run(url, "p", "open('count.txt').read()")["result"] == "'x'"
        streamed = httpx.get(f"{url}/v1/pads/q/cells/streamed", headers=HEADERS).json()
        assert streamed["status"] == "killed", streamed


def test_execute_stream_asked_to_continue_is_reattached_by_id(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    code = "import time\nprogress('started')\ntime.sleep(0.5)\n'after'"
    body = {"name": "p", "code": code, "id": "kept", "on_disconnect": "continue"}
    with httpx.stream(
        "POST", f"{url}/scratchpad/execute-stream", headers=HEADERS, json=body, timeout=30
    ) as response:
        lines = response.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))
    got = events(url, "p", "kept")
    assert got[-1][1]["type"] == "cell" and got[-1][1]["cell"]["result"] == "'after'"


def test_a_plain_execute_stream_client_gets_no_id_or_event_lines(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    body = {"name": "p", "code": "progress('a')\nprint('b')\n1", "id": "plain"}
    answer = httpx.post(f"{url}/scratchpad/execute-stream", headers=HEADERS, json=body, timeout=30)
    lines = [line for line in answer.text.split("\n") if line]
    assert lines and all(line.startswith(("data: ", ": ")) for line in lines), lines
