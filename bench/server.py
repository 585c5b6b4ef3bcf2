"""Pad server benchmark: a real ``scratchpad serve`` on a loopback port, driven over HTTP +
SSE, with the in-process round trip measured in the same run.

Prints: tiny-cell round trip (median), aggregate tiny-cell throughput for 1/10/100 concurrent
clients on 1/10/100 pads (every answer checked: a lost or misattributed result is counted),
and the number of live pads the machine holds with every pad answering. Nothing is asserted.

Throughput is measured twice: with a minimal keep-alive HTTP/1.1 client (what the server can
do; the load generator costs little CPU on this 2-core machine), and with RemoteRuntime, our
httpx client (what one Python process of clients gets). ``--quick`` runs fewer cells and stops
the live-pad climb early.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from runtime import tree_rss_mib  # bench/runtime.py: this script's directory is on sys.path
from scratchpad.config import Settings
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.remote import RemoteRuntime

KEY = "bench-key"
GRID = (1, 10, 100)


@dataclass
class Tally:
    cells: int = 0
    lost: int = 0  # no ok cell came back
    misattributed: int = 0  # a cell came back with another client's answer


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def server(home: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {**os.environ, "SCRATCHPAD_HOME": str(home), "SCRATCHPAD_API_KEY": KEY}
    command = [sys.executable, "-m", "scratchpad.cli", "serve", "--port", str(port)]
    process = subprocess.Popen(command, env=env, cwd=home, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.05)
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=120)


def pad(url: str, name: str) -> RemoteRuntime:
    return RemoteRuntime(name, url=url, api_key=KEY)


class RawClient:
    """A minimal keep-alive HTTP/1.1 client for execute-stream: the load generator."""

    def __init__(self, url: str, name: str) -> None:
        self.host, port = url.removeprefix("http://").split(":")
        self.port = int(port)
        self.name = name
        self.head = (
            "POST /scratchpad/execute-stream HTTP/1.1\r\n"
            f"host: {self.host}:{port}\r\nauthorization: Bearer {KEY}\r\n"
            "content-type: application/json\r\ncontent-length: "
        ).encode()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def start(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def execute(self, code: str) -> dict[str, object]:
        assert self.reader is not None and self.writer is not None
        body = json.dumps({"name": self.name, "code": code}).encode()
        self.writer.write(self.head + str(len(body)).encode() + b"\r\n\r\n" + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200") or b"chunked" not in head.lower():
            raise RuntimeError(head.decode(errors="replace"))
        data = b""
        while size := int((await self.reader.readuntil(b"\r\n"))[:-2], 16):
            data += (await self.reader.readexactly(size + 2))[:-2]
        await self.reader.readexactly(2)  # the empty line after the last chunk
        for block in data.split(b"\n\n"):
            frame = json.loads(block[6:]) if block.startswith(b"data: ") else {}
            if frame.get("type") == "cell":
                return dict(frame["cell"])
        raise RuntimeError(f"no cell in {data!r}")

    async def detach(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def round_trips(url: str, home: Path, repeats: int) -> tuple[float, float]:
    """Median ms of ``1+1``: over HTTP + SSE, and in-process (the reference)."""
    remote = pad(url, "rt")
    await remote.start()
    over_http = [await _timed(remote, "1+1") for _ in range(repeats)]
    await remote.detach()
    async with ScratchpadManager(settings=Settings(home=home / "local")) as manager:
        local = await manager.get_or_create("rt")
        in_process = [await _timed(local, "1+1") for _ in range(repeats)]
    return statistics.median(over_http) * 1000, statistics.median(in_process) * 1000


async def _timed(runtime: object, code: str) -> float:
    start = time.perf_counter()
    cell = await runtime.execute(code)  # type: ignore[attr-defined]
    assert cell.result == "2", cell
    return time.perf_counter() - start


async def throughput(
    url: str, clients: int, pads: int, total_cells: int, raw: bool
) -> tuple[float, Tally]:
    """Cells per second with ``clients`` concurrent clients spread over ``pads`` pads; every
    client checks that each answer is the one it asked for."""
    names = [f"t{pads}-{index % pads}" for index in range(clients)]
    starters = [pad(url, name) for name in sorted(set(names))]
    await asyncio.gather(*(r.start() for r in starters))
    await asyncio.gather(*(r.detach() for r in starters))
    runtimes = [RawClient(url, name) if raw else pad(url, name) for name in names]
    if raw:
        await asyncio.gather(*(r.start() for r in runtimes))
    per_client = max(1, total_cells // clients)
    tally = Tally()

    async def client(index: int, runtime: RawClient | RemoteRuntime) -> None:
        for seq in range(per_client):
            expected = index * 1_000_000 + seq
            answer = await runtime.execute(f"{index} * 1_000_000 + {seq}")
            cell = answer if isinstance(answer, dict) else answer.to_dict()
            tally.cells += 1
            if cell["status"] != "ok":
                tally.lost += 1
            elif cell["result"] != str(expected):
                tally.misattributed += 1

    start = time.perf_counter()
    await asyncio.gather(*(client(i, r) for i, r in enumerate(runtimes)))
    elapsed = time.perf_counter() - start
    await asyncio.gather(*(r.detach() for r in runtimes))
    return tally.cells / elapsed, tally


async def live_pads(url: str, server_pid: int, step: int, limit: int) -> list[str]:
    """Start pads ``step`` at a time up to ``limit``; after each step every pad must answer
    a cell naming itself. Stops at the first step where one does not."""
    rows: list[str] = []
    started: list[RemoteRuntime] = []
    while len(started) < limit:
        batch = [pad(url, f"live{len(started) + i}") for i in range(step)]
        begin = time.perf_counter()
        try:
            for chunk in range(0, len(batch), 25):
                await asyncio.gather(*(r.start() for r in batch[chunk : chunk + 25]))
        except Exception as exc:
            rows.append(f"| {len(started) + step} | start failed: {exc!r} | | |")
            break
        started.extend(batch)
        start_s = time.perf_counter() - begin
        answers = await asyncio.gather(*(r.execute(f"{r.name!r}") for r in started))
        answering = sum(c.result == repr(r.name) for c, r in zip(answers, started, strict=True))
        rss = tree_rss_mib(server_pid)
        rows.append(
            f"| {len(started)} | {answering} | {start_s:.1f} s for {step} | {rss:,.0f} MiB |"
        )
        print(rows[-1], flush=True)
        if answering != len(started):
            failed = next(
                c for c, r in zip(answers, started, strict=True) if c.result != repr(r.name)
            )
            why = (failed.error or "").strip()[-300:]
            print(f"first pad not answering: {failed.status}: {why}")
            break
    await asyncio.gather(*(r.detach() for r in started))
    return rows


async def main(quick: bool) -> None:
    repeats, total, limit = (50, 300, 200) if quick else (300, 2000, 1000)
    with tempfile.TemporaryDirectory(prefix="sp-bench-server-") as tmp:
        home = Path(tmp)
        with server(home / "server") as (url, process):
            http_ms, local_ms = await round_trips(url, home, repeats)
            print("| metric | over HTTP + SSE | in-process |\n|---|---|---|")
            print(
                f"| 1+1 round trip (median of {repeats}) | {http_ms:.2f} ms | {local_ms:.3f} ms |"
            )
            print(
                "\n| clients | pads | cells/s (minimal client) | cells/s (RemoteRuntime) "
                "| cells | lost | misattributed |"
            )
            print("|---|---|---|---|---|---|---|")
            for clients in GRID:
                for pads in GRID:
                    if pads > clients:
                        continue  # a pad with no client adds nothing
                    rate, tally = await throughput(url, clients, pads, total, raw=True)
                    ours, ours_tally = await throughput(url, clients, pads, total, raw=False)
                    cells = tally.cells + ours_tally.cells
                    lost = tally.lost + ours_tally.lost
                    wrong = tally.misattributed + ours_tally.misattributed
                    print(
                        f"| {clients} | {pads} | {rate:,.0f} | {ours:,.0f} | {cells} | {lost} "
                        f"| {wrong} |",
                        flush=True,
                    )
        with server(home / "live") as (url, process):
            print("\n| live pads | answering | start time | server tree RSS |")
            print("|---|---|---|---|")
            await live_pads(url, process.pid, 100, limit)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer cells, up to 200 pads")
    asyncio.run(main(parser.parse_args().quick))
