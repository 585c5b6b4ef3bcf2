"""A pad's live feed at the runtime level (PadWatch) and the richer pad list: real kernels,
subscribers in the same process."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

from scratchpad.events import wire
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.watch import Subscription
from scratchpad.scrub import register
from tests.conftest import wait_until_busy

WITHIN_S = 30.0


async def next_event(subscription: Subscription, kind: str | None = None) -> dict[str, Any]:
    """The next event (of ``kind``, skipping others), within a deadline."""
    async with asyncio.timeout(WITHIN_S):
        while True:
            event = await subscription.get()
            assert event is not None, "the subscription ended"
            if kind is None or event.type == kind:
                return wire(event)


async def events_until_cell(subscription: Subscription) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while not seen or seen[-1]["type"] != "cell":
        seen.append(await next_event(subscription))
    return seen


async def wait_for(condition: Any) -> None:
    async with asyncio.timeout(WITHIN_S):
        while not condition():  # noqa: ASYNC110 - state on objects, no event to wait on
            await asyncio.sleep(0.01)


async def test_a_watcher_sees_every_step_of_a_cell_it_did_not_run(
    manager: ScratchpadManager,
) -> None:
    subscription = manager.watch("watched").subscribe()  # before the pad exists
    pad = await manager.get_or_create("watched")
    code = "print('out')\nprogress('half')\ndisplay('shown')\n41 + 1"
    cell = await pad.execute(code, description="all kinds")
    seen = await events_until_cell(subscription)
    assert [event["type"] for event in seen] == [
        "status", "queued", "started", "output", "progress", "display", "cell",
    ]  # fmt: skip
    status, queued, started, output, progress, display, recorded = seen
    assert status["pad"]["status"] == "idle" and status["pad"]["name"] == "watched"
    brief = {"id": cell.id, "number": 1, "code": code, "description": "all kinds"}
    assert queued["cell"] == brief
    assert started["id"] == cell.id and started["number"] == 1 and started["started_at"] > 0
    assert output == {"type": "output", "id": cell.id, "stream": "stdout", "text": "out\n"}
    assert progress == {"type": "progress", "id": cell.id, "message": "half"}
    assert display["data"]["text/plain"] == "'shown'"
    assert recorded["cell"] == cell.to_dict()
    assert wire(manager.watch("watched").state()) == {"running": None, "queued": []}


async def test_a_watcher_arriving_mid_cell_gets_the_output_so_far_then_the_rest(
    manager: ScratchpadManager, scratch: Path
) -> None:
    pad = await manager.get_or_create("mid")
    flag = scratch / "go"
    code = (
        "import os, time\nprint('first', flush=True)\nprogress('waiting')\n"
        f"while not os.path.exists({str(flag)!r}):\n    time.sleep(0.01)\nprint('second')"
    )
    running = asyncio.create_task(pad.execute(code, description="waits"))
    queued = asyncio.create_task(pad.execute("'next'"))
    watch = manager.watch("mid")
    await wait_for(lambda: watch.running is not None and watch.running.progress == "waiting")
    subscription = watch.subscribe()
    state = wire(watch.state())
    now = state["running"]
    assert (now["stdout"], now["progress"], now["description"]) == ("first\n", "waiting", "waits")
    assert [brief["code"] for brief in state["queued"]] == ["'next'"]
    flag.touch()
    rest = await events_until_cell(subscription)
    assert [(e["type"], e.get("text")) for e in rest] == [("output", "second\n"), ("cell", None)]
    assert rest[-1]["cell"]["stdout"] == "first\nsecond\n" == (await running).stdout
    assert (await next_event(subscription, "started"))["id"] == (await queued).id


async def test_a_stuck_subscriber_does_not_hold_up_a_cell_and_overflows(
    manager: ScratchpadManager,
) -> None:
    pad = await manager.get_or_create("flood")
    stuck = manager.watch("flood").subscribe()  # never read while the cell runs
    cell = await pad.execute("print('x' * 5_000_000)", timeout_s=60)
    assert cell.status == "ok" and len(cell.stdout) == 5_000_001
    assert stuck.overflowed and stuck.closed
    assert await next_event(stuck) == {"type": "overflow"}
    assert await stuck.get() is None  # ended: the client takes a fresh snapshot
    later = manager.watch("flood").subscribe()  # a fresh subscriber works as before
    await pad.execute("1")
    assert (await next_event(later, "cell"))["cell"]["result"] == "1"


async def test_status_events_on_start_reset_close_and_remove(manager: ScratchpadManager) -> None:
    subscription = manager.watch("life").subscribe()
    pad = await manager.get_or_create("life")
    await pad.execute("x = 1")
    await pad.reset()
    await manager.close("life")
    await manager.remove("life")
    statuses: list[dict[str, Any]] = []
    while len(statuses) < 4:
        statuses.append((await next_event(subscription, "status"))["pad"])
    assert [(s["status"], s["cells"]) for s in statuses] == [
        ("idle", 0), ("idle", 0), ("stopped", 0), ("removed", 0),
    ]  # fmt: skip
    assert statuses[0]["memory_bytes"] > 0 and statuses[2]["memory_bytes"] is None


async def test_a_kernel_that_dies_in_a_cell_is_dead_with_its_cause(
    manager: ScratchpadManager,
) -> None:
    subscription = manager.watch("dies").subscribe()
    pad = await manager.get_or_create("dies")
    cell = await pad.execute("import os\nos._exit(3)")
    assert cell.status == "killed"
    status = await next_event(subscription, "status")  # the start
    while status["pad"]["status"] != "dead":
        status = await next_event(subscription, "status")
    assert status["pad"]["cause"] == "exited with code 3"
    [info] = await manager.list_pads()
    assert (info.status, info.cause, info.memory_bytes) == ("dead", "exited with code 3", None)
    await pad.execute("1")  # a fresh kernel
    assert (await next_event(subscription, "status"))["pad"]["status"] in ("busy", "idle")
    assert (await manager.pad_info("dies")).status == "idle"


async def test_a_kernel_killed_between_cells_is_announced(manager: ScratchpadManager) -> None:
    pad = await manager.get_or_create("shot")
    assert isinstance(pad, LocalRuntime) and pad.pid is not None
    subscription = manager.watch("shot").subscribe()
    os.kill(pad.pid, signal.SIGKILL)
    status = (await next_event(subscription, "status"))["pad"]
    assert status["status"] == "dead"
    assert status["cause"] == "was killed by SIGKILL from outside Scratchpad"


async def test_the_pad_list_says_what_runs_since_when_and_its_memory(
    manager: ScratchpadManager,
) -> None:
    pad = await manager.get_or_create("sleepy")
    await pad.execute("x = 1")
    task = asyncio.create_task(pad.execute("import time\ntime.sleep(30)", description="nap"))
    await wait_until_busy(pad)
    await wait_for(lambda: manager.watch("sleepy").running is not None)
    [busy] = await manager.list_pads()
    assert busy.status == "busy" and busy.busy_since is not None
    assert busy.running is not None and busy.running["description"] == "nap"
    assert busy.memory_bytes is not None and busy.memory_bytes > 1_000_000
    assert busy.last_activity == busy.busy_since and busy.cells == 1
    await pad.cancel()
    await task
    await manager.close("sleepy")
    [stopped] = await manager.list_pads()
    history = manager.settings.home / "pads" / "sleepy" / "history.jsonl"
    assert (stopped.status, stopped.memory_bytes, stopped.busy_since) == ("stopped", None, None)
    assert (stopped.cells, stopped.last_activity) == (2, history.stat().st_mtime)


async def test_no_secret_reaches_a_watcher(manager: ScratchpadManager, scratch: Path) -> None:
    secret = "feed-s3cret-value-42"
    register([(secret, "DS_FEED__TOKEN")])
    pad = await manager.get_or_create("secretive")
    subscription = manager.watch("secretive").subscribe()
    flag = scratch / "go"
    code = (
        f"import os, time\nx = {secret!r}\nprint(x, flush=True)\nprogress(x)\ndisplay(x)\n"
        f"while not os.path.exists({str(flag)!r}):\n    time.sleep(0.01)\nx"
    )
    running = asyncio.create_task(pad.execute(code, description=f"uses {secret}"))
    watch = manager.watch("secretive")
    await wait_for(lambda: watch.running is not None and watch.running.displays)
    snapshot = repr(watch.state())
    flag.touch()
    await running
    seen = repr(await events_until_cell(subscription))
    for text in (snapshot, seen):
        assert secret not in text and "[DS_FEED__TOKEN]" in text


async def test_a_queued_cell_whose_caller_goes_away_leaves_the_queue(
    manager: ScratchpadManager,
) -> None:
    pad = await manager.get_or_create("leaving")
    watch = manager.watch("leaving")
    subscription = watch.subscribe()
    sleeping = asyncio.create_task(pad.execute("import time\ntime.sleep(30)"))
    await wait_until_busy(pad)
    waiting = asyncio.create_task(pad.execute("'never'"))
    await wait_for(lambda: len(watch.queue) == 1)
    waiting.cancel()  # the caller goes away while its cell waits
    ended = await next_event(subscription, "cell")
    assert (ended["cell"]["code"], ended["cell"]["status"]) == ("'never'", "cancelled")
    assert watch.state().queued == []
    await pad.cancel()
    await sleeping
