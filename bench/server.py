"""Pad server benchmark: a real ``scratchpad serve`` on a loopback port, driven over HTTP +
SSE, with the in-process round trip measured in the same run.

Prints: tiny-cell round trip (median), aggregate tiny-cell throughput for 1/10/100 concurrent
clients on 1/10/100 pads (every answer checked: a lost or misattributed result is counted),
and a live-pad climb: 100 more pads each step, every pad answering a cell naming itself. Every
failure is counted by cause (the exception class, or the cell's status with the transport error
that lost it, or "wrong answer"), so a race reads differently from a machine out of room.
Nothing is asserted.

Throughput is measured twice: with a minimal keep-alive HTTP/1.1 client (what the server can
do; the load generator costs little CPU on this 2-core machine), and with RemoteRuntime, our
httpx client (what one Python process of clients gets). ``--quick`` runs fewer cells and stops
the live-pad climb early; ``--max-pads`` caps the climb (each live pad costs ~15 MiB).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from runtime import tree_pss_mib  # bench/runtime.py: this script's directory is on sys.path
from scratchpad.config import Settings
from scratchpad.isolation import cli_command
from scratchpad.runtime.cell import Cell
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.remote import RemoteRuntime

KEY = "bench-key"
GRID = (1, 10, 100)


TRANSPORT_ERROR = re.compile(r"\b([A-Z]\w*(?:Error|Timeout|Exception))\(")
URL = re.compile(r"https?://\S+")


def cause(answer: dict[str, object] | BaseException, expected: str) -> str | None:
    """None for the expected answer, else why not, short enough to count: the exception class
    (and the transport error inside it), the cell's status (and the transport error that lost
    it, e.g. ``killed (ReadError)``), the first words of its error, or ``wrong answer``."""
    if isinstance(answer, BaseException):
        return raised(answer)
    status, error = str(answer.get("status")), URL.sub("<server>", str(answer.get("error") or ""))
    if status == "ok":
        return None if answer.get("result") == expected else "wrong answer"
    if inner := TRANSPORT_ERROR.search(error):
        return f"{status} ({inner[1]})"
    last = error.strip().splitlines()[-1] if error.strip() else ""
    return f"{status}: {' '.join(last.split()[:8])}" if last else status


def raised(exc: BaseException) -> str:
    inner = TRANSPORT_ERROR.search(str(exc))
    return type(exc).__name__ + (f" ({inner[1]})" if inner else "")


def by_cause(causes: Counter[str]) -> str:
    return ", ".join(f"{count} {why}" for why, count in causes.most_common()) or "none"


@dataclass
class Tally:
    cells: int = 0
    lost: int = 0  # no ok cell came back
    misattributed: int = 0  # a cell came back with another client's answer
    causes: Counter[str] = field(default_factory=Counter)

    def count(self, answer: dict[str, object] | BaseException, expected: str) -> None:
        self.cells += 1
        why = cause(answer, expected)
        if why is None:
            return
        self.causes[why] += 1
        if why == "wrong answer":
            self.misattributed += 1
        else:
            self.lost += 1


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
    command = cli_command("serve", "--port", str(port))
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

    async def reconnect(self) -> None:
        await self.detach()
        await self.start()

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
            try:
                answer = await runtime.execute(f"{index} * 1_000_000 + {seq}")
            except Exception as exc:  # every failure is counted, by cause
                tally.count(exc, str(expected))
                if isinstance(runtime, RawClient):
                    await runtime.reconnect()  # its connection is in an unknown state
                continue
            tally.count(answer if isinstance(answer, dict) else answer.to_dict(), str(expected))

    start = time.perf_counter()
    await asyncio.gather(*(client(i, r) for i, r in enumerate(runtimes)))
    elapsed = time.perf_counter() - start
    await asyncio.gather(*(r.detach() for r in runtimes))
    return tally.cells / elapsed, tally


async def live_pads(url: str, server_pid: int, step: int, limit: int) -> list[str]:
    """Start pads ``step`` at a time up to ``limit``; after each step every pad answers a cell
    naming itself, and the pads that do not are counted by cause. Stops when pads no longer
    start (the machine is out of room), not at a lost answer (which may be a race)."""
    rows: list[str] = []
    started: list[RemoteRuntime] = []
    while len(started) < limit:
        batch = [
            pad(url, f"live{len(started) + i}") for i in range(min(step, limit - len(started)))
        ]
        begin = time.perf_counter()
        starts: list[BaseException | None] = []
        for chunk in range(0, len(batch), 25):
            starts += await asyncio.gather(
                *(r.start() for r in batch[chunk : chunk + 25]), return_exceptions=True
            )
        failed_starts = Counter(raised(s) for s in starts if s is not None)
        if failed_starts:
            rows.append(
                f"| {len(started) + len(batch)} | start failed: {by_cause(failed_starts)} |"
            )
            print(rows[-1], flush=True)
            started.extend(batch)  # detached below like the others
            break
        started.extend(batch)
        start_s = time.perf_counter() - begin
        answers = await asyncio.gather(
            *(r.execute(f"{r.name!r}") for r in started), return_exceptions=True
        )
        causes = Counter(
            why
            for answer, r in zip(answers, started, strict=True)
            if (why := cause(_as_dict(answer), repr(r.name))) is not None
        )
        memory = tree_pss_mib(server_pid)
        rows.append(
            f"| {len(started)} | {len(started) - causes.total()} | {by_cause(causes)} "
            f"| {start_s:.1f} s for {len(batch)} | {memory:,.0f} MiB |"
        )
        print(rows[-1], flush=True)
    await asyncio.gather(*(r.detach() for r in started))
    return rows


def _as_dict(answer: Cell | BaseException) -> dict[str, object] | BaseException:
    return answer if isinstance(answer, BaseException) else answer.to_dict()


async def main(quick: bool, max_pads: int | None) -> None:
    repeats, total, limit = (50, 300, 200) if quick else (300, 2000, 1000)
    limit = min(limit, max_pads) if max_pads else limit
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
                "| cells | lost | misattributed | failures by cause |"
            )
            print("|---|---|---|---|---|---|---|---|")
            for clients in GRID:
                for pads in GRID:
                    if pads > clients:
                        continue  # a pad with no client adds nothing
                    rate, tally = await throughput(url, clients, pads, total, raw=True)
                    ours, ours_tally = await throughput(url, clients, pads, total, raw=False)
                    cells = tally.cells + ours_tally.cells
                    lost = tally.lost + ours_tally.lost
                    wrong = tally.misattributed + ours_tally.misattributed
                    causes = by_cause(tally.causes + ours_tally.causes)
                    print(
                        f"| {clients} | {pads} | {rate:,.0f} | {ours:,.0f} | {cells} | {lost} "
                        f"| {wrong} | {causes} |",
                        flush=True,
                    )
        with server(home / "live") as (url, process):
            print("\n| live pads | answering | failures by cause | start time | server tree PSS |")
            print("|---|---|---|---|---|")
            await live_pads(url, process.pid, 100, limit)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer cells, up to 200 pads")
    parser.add_argument(
        "--max-pads", type=int, help="stop the live-pad climb here (each pad costs ~15 MiB)"
    )
    args = parser.parse_args()
    asyncio.run(main(args.quick, args.max_pads))
