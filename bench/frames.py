"""Kernel frames benchmark: what one pad's huge frames cost the rest of a real ``scratchpad
serve``, beside the same server with nothing else going on, in one run.

For each scenario it prints the latency of ``GET /healthz`` asked one after another while the
scenario runs (median, 99th percentile, worst), how much the server's resident memory grew at
its peak, and how long the pad's cell took. Scenarios: idle; a pad showing large legitimate
displays (4 MiB of base64 each, the most the server keeps of one display by default); a pad
whose cell writes a forged frame header announcing 400 MB to its control channel and then
streams all 400 MB (ignoring the interrupt). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from server import pad, server  # bench/server.py: this script's directory is on sys.path

KERNEL = "__import__('sys').modules['_scratchpad_kernel'].KERNEL"
DISPLAYS = (
    "import base64, os\n"
    "png = base64.b64encode(os.urandom(3 * 1024 * 1024 - 1024)).decode()\n"
    "class Image:\n"
    "    def _repr_png_(self):\n"
    "        return base64.b64decode(png)\n"
    "for _ in range({count}):\n"
    "    display(Image())"
)
FORGED = (
    "import os, signal, struct\n"
    "old = signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    f"os.write({KERNEL}.ctrl_out, struct.pack('>I', 400_000_000))\n"
    "chunk = b'x' * (1 << 20)\n"
    "for _ in range(400_000_000 // len(chunk)):\n"
    f"    os.write({KERNEL}.ctrl_out, chunk)\n"
    "signal.signal(signal.SIGINT, old)"
)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def scenario(url: str, pid: int, code: str | None, idle_s: float) -> str:
    """One row: /healthz latencies while ``code`` runs in a pad (or for ``idle_s``)."""
    sender = pad(url, "sender")
    await sender.start()
    before = peak = rss_mib(pid)
    started = time.perf_counter()
    running = asyncio.create_task(sender.execute(code, estimated_seconds=600)) if code else None
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while running is not None or time.perf_counter() - started < idle_s:
            if running is not None and running.done():
                break
            asked = time.perf_counter()
            (await client.get("/healthz")).raise_for_status()
            latencies.append(time.perf_counter() - asked)
            peak = max(peak, rss_mib(pid))
    took = time.perf_counter() - started
    outcome = ""
    if running is not None:
        cell = await running
        outcome = cell.status + (f": {cell.error.splitlines()[0][:60]}…" if cell.error else "")
    await sender.detach()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return (
        f"| {statistics.median(latencies) * 1000:.2f} ms | {p99 * 1000:.2f} ms "
        f"| {latencies[-1] * 1000:.2f} ms | {len(latencies)} | {peak - before:+.0f} MiB "
        f"| {took:.2f} s | {outcome or '—'} |"
    )


async def main(quick: bool) -> None:
    os.environ["SCRATCHPAD_INTERRUPT_GRACE_S"] = "600"  # the forged stream ignores SIGINT
    displays = 5 if quick else 20
    rows = (
        ("idle", None),
        (f"{displays} displays of 4 MiB", DISPLAYS.format(count=displays)),
        ("forged 400 MB frame, streamed", FORGED),
    )
    with (
        tempfile.TemporaryDirectory(prefix="sp-bench-frames-") as tmp,
        server(Path(tmp) / "server") as (url, process),
    ):
        print(
            "| scenario | /healthz median | p99 | worst | asked | server RSS peak "
            "| cell took | cell |\n|---|---|---|---|---|---|---|---|"
        )
        for name, code in rows:
            print(f"| {name} {await scenario(url, process.pid, code, 2.0)}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer displays")
    asyncio.run(main(parser.parse_args().quick))
