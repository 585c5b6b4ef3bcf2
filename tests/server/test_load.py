"""Many RemoteRuntime clients against a real ``scratchpad serve``: a burst of cells after an
idle gap loses nothing to a keep-alive race (the server closing an idle connection just as a
client sends its next request on it, which answers a reset: "went away … result unknown")."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import statistics
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from scratchpad.runtime.remote import POOL_KEEPALIVE_S, RemoteRuntime
from tests.process_helpers import process_gone
from tests.server_helpers import running_server

KEY = "load-key"
PADS = 100
CLIENTS = 200  # two per pad; each its own RemoteRuntime (own pool), as real clients are
SPREAD_S = 0.5  # the clients' idle times at a burst sweep each target ± SPREAD_S / 2
# The idle times the bursts straddle: the client's pool expiry, and 5 s, uvicorn's default
# keep-alive and httpx's default pool expiry (the equal pair that raced before the server's
# keep-alive was set well above any client's). The server's own keep-alive (75 s by default)
# is out of reach of a short test; the client lets go of its connections long before it.
TARGETS_S = (POOL_KEEPALIVE_S, 5.0)


async def test_bursts_after_idle_gaps_that_straddle_keep_alive_timeouts_lose_no_cell(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, process):
        starters = [RemoteRuntime(f"load{i}", url=url, api_key=KEY) for i in range(PADS)]
        for chunk in range(0, PADS, 25):
            await asyncio.gather(*(pad.start() for pad in starters[chunk : chunk + 25]))
        await asyncio.gather(*(pad.detach() for pad in starters))
        clients = [RemoteRuntime(f"load{i % PADS}", url=url, api_key=KEY) for i in range(CLIENTS)]
        failures: Counter[str] = Counter()
        try:
            for round_, target in enumerate(TARGETS_S):
                finished = await _staggered(clients, round_, failures)
                # The idle gap is the subject of the test: the burst goes out when the clients'
                # idle times run from target + SPREAD_S / 2 (first client) down to below it.
                loop = asyncio.get_running_loop()
                await asyncio.sleep(statistics.median(finished) + target - loop.time())
                await asyncio.gather(
                    *(
                        _cell(pad, index, 100 + round_, failures)
                        for index, pad in enumerate(clients)
                    )
                )
        finally:
            await asyncio.gather(*(pad.detach() for pad in clients))
            _stop_and_check_kernels_gone(process)
        assert not failures, f"cells lost or wrong, by cause: {dict(failures)}"


def test_the_server_closes_an_idle_connection_after_its_configured_keep_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SCRATCHPAD_HTTP_KEEPALIVE_S reaches uvicorn: at 1 s the server closes an idle connection
    long before uvicorn's own default (5 s) would."""
    monkeypatch.setenv("SCRATCHPAD_HTTP_KEEPALIVE_S", "1")
    with running_server(tmp_path / "home", tmp_path, KEY) as (url, _):
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nhost: test\r\n\r\n")
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += conn.recv(65536)
            head, body = answer.split(b"\r\n\r\n", 1)
            length = re.search(rb"content-length: (\d+)", head.lower())
            assert length is not None
            while len(body) < int(length[1]):
                body += conn.recv(65536)
            idle_since = time.monotonic()
            assert conn.recv(1) == b""  # closed by the server (a socket timeout would raise)
            assert time.monotonic() - idle_since < 4


async def _staggered(
    clients: list[RemoteRuntime], round_: int, failures: Counter[str]
) -> list[float]:
    """Each client runs a cell, client i starting i * step after the first; returns when each
    answer came back (loop time), so the next burst finds their connections idle for spread
    times."""
    loop = asyncio.get_running_loop()
    step = SPREAD_S / len(clients)

    async def one(index: int, pad: RemoteRuntime) -> float:
        await asyncio.sleep(index * step)
        await _cell(pad, index, round_, failures)
        return loop.time()

    return list(await asyncio.gather(*(one(i, pad) for i, pad in enumerate(clients))))


async def _cell(pad: RemoteRuntime, index: int, seq: int, failures: Counter[str]) -> None:
    expected = str(index * 1000 + seq)
    try:
        cell = await pad.execute(expected)
    except Exception as exc:  # counted by cause, like every other failure
        failures[f"raised {type(exc).__name__}"] += 1
        return
    if cell.status != "ok":
        error = re.sub(r"https?://\S+", "<server>", (cell.error or "").strip())
        failures[f"{cell.status}: {error[:90]}"] += 1
    elif cell.result != expected:
        failures["wrong answer"] += 1


def _stop_and_check_kernels_gone(process: subprocess.Popen[str]) -> None:
    """Graceful shutdown closes every pad: no kernel outlives the server."""
    kernels = _children(process.pid)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) in (0, -signal.SIGTERM)
    assert len(kernels) >= PADS
    assert [pid for pid in kernels if not process_gone(pid)] == []


def _children(pid: int) -> list[int]:
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(child) for child in (task / "children").read_text().split()]
    return children
