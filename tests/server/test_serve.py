"""``scratchpad serve`` as a real process on a loopback port."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from scratchpad.errors import ConfigError
from scratchpad.isolation import cli_command
from scratchpad.server.serve import listen
from tests.process_helpers import process_gone, processes_in
from tests.server_helpers import running_server

KEY = "loopback-key"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    with running_server(tmp_path / "home", tmp_path, KEY) as running:
        yield running


def test_a_dropped_client_does_not_lose_the_cell_and_shutdown_closes_pads(
    server: tuple[str, subprocess.Popen[str]], tmp_path: Path
) -> None:
    url, process = server
    headers = {"Authorization": f"Bearer {KEY}"}
    code = "import os, time\nprogress('started')\ntime.sleep(0.5)\nos.getpid()"
    with httpx.stream(
        "POST",
        f"{url}/scratchpad/execute-stream",
        headers=headers,
        json={"name": "p", "code": code, "on_disconnect": "continue"},
        timeout=30,
    ) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                assert json.loads(line[6:]) == {"type": "progress", "message": "started"}
                break  # the client goes away mid-cell
    deadline = time.monotonic() + 20
    cells: list[dict[str, object]] = []
    while not cells and time.monotonic() < deadline:
        cells = httpx.get(f"{url}/v1/pads/p", headers=headers).json()["cells"]
        time.sleep(0.1)
    assert cells and cells[0]["status"] == "ok"
    kernels = processes_in(tmp_path / "home" / "workspaces")  # the pad's, working there
    assert kernels
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) in (0, -signal.SIGTERM)  # uvicorn re-raises it when done
    assert all(process_gone(pid) for pid in kernels)  # graceful shutdown closed the pad
    assert "Scratchpad serving on" in (process.stdout.read() if process.stdout else "")


def test_binding_beyond_loopback_needs_a_configured_key(tmp_path: Path) -> None:
    env = {**os.environ, "SCRATCHPAD_HOME": str(tmp_path / "home")}
    env.pop("SCRATCHPAD_API_KEY", None)
    done = subprocess.run(
        cli_command("serve", "--host", "0.0.0.0", "--port", "9"),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without SCRATCHPAD_API_KEY" in done.stderr


def test_a_client_that_stops_reading_does_not_hold_up_its_pad(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = server
    host, port = url.removeprefix("http://").split(":")
    code = "for _ in range(40):\n    print('x' * 1_000_000)\n'done'"
    body = json.dumps({"name": "p", "code": code, "stream_output": True}).encode()
    request = (
        f"POST /scratchpad/execute-stream HTTP/1.1\r\nhost: {host}\r\n"
        f"authorization: Bearer {KEY}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    headers = {"Authorization": f"Bearer {KEY}"}
    with socket.create_connection((host, int(port))) as silent:
        silent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        silent.sendall(request + body)  # and never reads the 40 MB that come back
        deadline = time.monotonic() + 60
        cells: list[dict[str, object]] = []
        while not cells and time.monotonic() < deadline:
            time.sleep(0.2)
            cells = httpx.get(f"{url}/v1/pads/p", headers=headers).json()["cells"]
        assert cells and cells[0]["result"] == "'done'"
        answer = httpx.post(
            f"{url}/scratchpad/execute-stream",
            headers=headers,
            json={"name": "p", "code": "1 + 1"},
            timeout=30,
        )
        assert '"result": "2"' in answer.text


def test_a_websocket_handshake_is_never_accepted(
    server: tuple[str, subprocess.Popen[str]],
) -> None:
    port = int(server[0].rsplit(":", 1)[1])
    handshake = (
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {KEY}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(handshake.encode())
        status = conn.makefile("rb").readline().decode()
    assert status.startswith("HTTP/1.1 ") and " 101 " not in status, status


def test_the_listening_socket_is_tcp_so_replies_are_not_held_back() -> None:
    """asyncio sets TCP_NODELAY on accepted sockets only when the listener's proto is TCP;
    without it every streamed reply waits ~40 ms for a delayed ACK (Nagle)."""
    sock = listen("127.0.0.1", 0)
    with sock:
        assert sock.proto == socket.IPPROTO_TCP and sock.getsockname()[1] > 0
    taken = listen("127.0.0.1", 0)
    with taken, pytest.raises(ConfigError, match=r"cannot listen on 127\.0\.0\.1"):
        listen("127.0.0.1", taken.getsockname()[1])


def test_serve_makes_an_older_home_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    sqlite3.connect(home / "observations.db").close()  # an older store, 0644
    (home / "observations.db").chmod(0o644)
    with running_server(home, tmp_path, KEY):
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in home.glob("observations.db*")}
        assert set(modes) == {"observations.db", "observations.db-wal", "observations.db-shm"}
        assert modes == dict.fromkeys(modes, 0o600)


@pytest.mark.parametrize("bound", [False, True], ids=["own directories", "bound workspace"])
def test_the_banner_says_which_home_it_serves_and_where_pads_work(
    tmp_path: Path, bound: bool
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    home, workspace = tmp_path / "home", project if bound else None
    with running_server(home, tmp_path, KEY, workspace=workspace) as (url, process):
        assert process.stdout is not None
        banner = [process.stdout.readline().strip() for _ in range(2)]
        answer = httpx.post(
            f"{url}/scratchpad/execute-stream",
            headers={"Authorization": f"Bearer {KEY}"},
            json={"name": "p", "code": "import os\nos.getcwd()"},
            timeout=60,
        )
    if bound:
        assert banner[1] == f"home:    {project}/.scratchpad (pads work in {project})"
        assert f'"result": {json.dumps(repr(str(project)))}' in answer.text
    else:
        assert banner[1] == f"home:    {home} (pads work in {home}/workspaces/<pad>)"
        own = home / "workspaces" / "p"
        assert f'"result": {json.dumps(repr(str(own)))}' in answer.text


def test_a_workspace_that_is_no_directory_is_refused_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "SCRATCHPAD_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        cli_command("serve", "--workspace", str(tmp_path / "missing")),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "does not exist" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
