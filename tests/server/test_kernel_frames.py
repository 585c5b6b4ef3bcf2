"""Forged kernel frames against a real ``scratchpad serve``: what one client's cell forges never
reaches another client's cell, and one pad's huge frame neither swells the server nor stops
it answering."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from scratchpad.runtime.inkernel.protocol import HEADER
from scratchpad.runtime.remote import RemoteRuntime
from tests.runtime.test_forged_frames import AWAIT_NEXT, KERNEL, MIB, done, forge
from tests.server_helpers import running_server

KEY = "frames-key"


def server_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def test_forged_frames_stay_in_their_own_cell_over_http(tmp_path: Path) -> None:
    env = {"SCRATCHPAD_INTERRUPT_GRACE_S": "60"}  # the streaming cell below ignores SIGINT
    with running_server(tmp_path / "home", tmp_path, KEY, env) as (url, process):
        forger = RemoteRuntime("shared", url=url, api_key=KEY)
        other_client = RemoteRuntime("shared", url=url, api_key=KEY)
        bystander = RemoteRuntime("bystander", url=url, api_key=KEY)
        try:
            await forger.execute("kept = 1")
            code = forge(done("x1", "'chosen'")) + AWAIT_NEXT + "'real x'"
            assert (await forger.execute(code, cell_id="x1")).result == "'chosen'"
            assert (await other_client.execute("'mine'")).result == "'mine'"

            stream = (
                "import signal\n"
                "old = signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                + forge(HEADER.pack(400_000_000))
                + f"chunk = b'x' * {MIB}\n"
                "for _ in range(400):\n"
                f"    os.write({KERNEL}.ctrl_out, chunk)\n"
                "signal.signal(signal.SIGINT, old)\n"
                "'streamed'"
            )
            before = peak = server_rss(process.pid)
            sending = asyncio.create_task(forger.execute(stream, estimated_seconds=120))
            health = []
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                while not sending.done():
                    health.append((await http.get("/healthz")).status_code)
                    cell = await bystander.execute("6 * 7")
                    assert (cell.status, cell.result) == ("ok", "42")
                    peak = max(peak, server_rss(process.pid))
            cell = await sending
            assert health and set(health) == {200}
            assert peak - before < 64 * MIB, f"the server grew by {(peak - before) >> 20} MiB"
            assert cell.status == "error"
            assert cell.error is not None
            assert cell.error.startswith("The kernel sent a frame of 400,000,000 bytes, over the")
            assert (await other_client.execute("kept")).result == "1"
        finally:
            for runtime in (forger, other_client, bystander):
                await runtime.detach()
