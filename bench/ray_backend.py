"""Ray backend benchmark: pads on a Ray cluster beside local pads, measured in the same run.

A small cluster of this machine (a head and one worker node, one CPU and an 80 MiB object
store each, on 127.0.0.1, no dashboard) holds the Ray pads, pinned to the worker node; the
local pads run on this machine as usual. Each row measures both (taking turns where it
repeats) and prints medians; nothing here is asserted. Then where the extra milliseconds of
a Ray pad go: a bare Ray actor call and bare streaming generators on the same node, and the
pad's actor read directly (no relay here), beside the two pads.

Run with ``.venv/bin/python bench/ray_backend.py`` (``make bench`` does); ``--quick`` uses
fewer repeats. Without Ray installed it says what to install and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scratchpad.config import Settings
from scratchpad.runtime.base import ScratchpadRuntime
from scratchpad.runtime.cell import Cell, OutputEvent
from scratchpad.runtime.limits import proportional
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.runtime.proctree import descendants

MIB = 1024 * 1024
GIB = 1024 * MIB
LOOPBACK = "127.0.0.1"
NODE = "bench_node"  # the worker node's custom resource: Ray pads and bare actors go there
PLACED = {"custom": {NODE: 0.01}}  # a pad's resources
ON_NODE: dict[str, Any] = {"resources": {NODE: 0.01}, "num_cpus": 0}  # a bare actor's
PRINT_MIB = "print('x' * (1024 * 1024 - 1))"
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Plan:
    """How many of each measurement (``--quick`` shrinks them)."""

    round_trips: int
    tiny_cells: int
    new_pads: int
    streams: int
    many_pads: int


FULL = Plan(round_trips=1000, tiny_cells=1000, new_pads=5, streams=7, many_pads=10)
QUICK = Plan(round_trips=200, tiny_cells=200, new_pads=3, streams=3, many_pads=10)


# -- measuring ------------------------------------------------------------------------------
def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def median(samples: list[float]) -> float:
    return statistics.median(samples)


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


async def interleaved(
    calls: dict[str, Callable[[], Awaitable[Any]]], repeats: int, warmup: int = 20
) -> dict[str, float]:
    """The median time of each call, the calls taking turns (the same load for each)."""
    for _ in range(warmup):
        for call in calls.values():
            await call()
    samples: dict[str, list[float]] = {key: [] for key in calls}
    for _ in range(repeats):
        for key, call in calls.items():
            samples[key].append(await timed(call))
    return {key: median(values) for key, values in samples.items()}


def rss(pids: list[int]) -> int:
    """Resident memory of these processes, summed (shared pages counted in each)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += int(Path(f"/proc/{pid}/statm").read_bytes().split()[1]) * PAGE
    return total


def tree(pid: int) -> list[int]:
    return [pid, *descendants(pid)]


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def actor_process(kernel_pid: int) -> int:
    """The Ray worker process holding the kernel ``kernel_pid`` (its ``ray::`` ancestor)."""
    pid = kernel_pid
    while pid > 1:
        if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::"):
            return pid
        pid = parent(pid)
    raise RuntimeError(f"kernel {kernel_pid} has no Ray worker among its ancestors")


def raylet_of(resource: str) -> int:
    """The raylet of the node that has custom resource ``resource``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if argv[0].endswith(b"/raylet") and any(
                arg.startswith(b"--static_resource_list=") and f"{resource},".encode() in arg
                for arg in argv
            ):
                return int(entry.name)
    raise RuntimeError(f"no raylet has resource {resource!r}")


def mem_total() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


# -- the cluster ----------------------------------------------------------------------------
def node_args(**resources: float) -> dict[str, Any]:
    return {
        "num_cpus": 1,
        "resources": resources,
        "node_ip_address": LOOPBACK,
        "object_store_memory": 80 * MIB,
    }


@contextlib.contextmanager
def cluster() -> Iterator[str]:
    """A head and one worker node on loopback; its address. Everything is shut down at the
    end, also when starting fails half way."""
    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    ray_constants.ENABLE_RAY_CLUSTER = False  # 127.0.0.1 stays 127.0.0.1 (see main)
    local: Any = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={**node_args(head=1), "include_dashboard": False},
    )
    try:
        local.add_node(**node_args(**{NODE: 100}))
        local.wait_for_nodes()
        yield str(local.address)
    finally:
        ray.shutdown()
        local.shutdown()


class Bare:
    """The floor under a Ray pad's round trip: an async actor that does nothing."""

    async def ping(self) -> int:
        return 1

    def pid(self) -> int:
        return os.getpid()

    async def stream(self, count: int, chars: int = 0) -> AsyncIterator[tuple[str, Any]]:
        for index in range(count):
            yield ("item", "x" * chars if chars else index)


def carried(value: Any) -> int:
    """Characters of output in one item of a pad actor's stream (an output event, a Cell, a
    list of them)."""
    if isinstance(value, list | tuple):
        return sum(carried(each) for each in value)
    if isinstance(value, OutputEvent):
        return len(value.text)
    if isinstance(value, Cell):
        return len(value.stdout) + len(value.stderr)
    return 0


async def drain(generator: Any) -> int:
    """Read a Ray streaming generator to its end; how many items it gave."""
    count = 0
    async for ref in generator:
        await ref
        count += 1
    return count


async def anatomy(generator: Any) -> dict[str, list[int]]:
    """What a pad actor's execute stream carried: by kind, how many events and how many
    characters of output, and how many Ray messages (``messages``) they took."""
    kinds: dict[str, list[int]] = {"messages": [0, 0]}
    async for ref in generator:
        kinds["messages"][0] += 1
        for kind, value in await ref:  # the events that came at once, in one message
            counted = kinds.setdefault(kind, [0, 0])
            counted[0] += 1
            counted[1] += carried(value)
    return kinds


def told(kinds: dict[str, list[int]]) -> str:
    return ", ".join(
        f"{kind} {items}" + (f" ({chars / MIB:.1f} MiB)" if chars else "")
        for kind, (items, chars) in kinds.items()
    )


def streaming(method: Any, *args: Any) -> Any:
    """Call an actor's async generator method as a Ray streaming generator."""
    return method.options(num_returns="streaming").remote(*args)


# -- rows -----------------------------------------------------------------------------------
async def tiny_cells(pads: dict[str, ScratchpadRuntime], count: int) -> dict[str, float]:
    """The time each pad takes for ``count`` tiny cells, the pads taking turns every tenth
    (the same load for each)."""
    took = dict.fromkeys(pads, 0.0)
    for chunk in range(10):
        for key, pad in pads.items():
            start = time.perf_counter()
            for index in range(chunk * count // 10, (chunk + 1) * count // 10):
                await pad.execute(f"v = {index}")
            took[key] += time.perf_counter() - start
    return took


async def new_pads(manager: ScratchpadManager, prefix: str, count: int, **placed: Any) -> float:
    samples = []
    for index in range(count):
        name = f"{prefix}{index}"
        start = time.perf_counter()
        pad = await manager.get_or_create(name, **placed)
        cell = await pad.execute("1+1")
        samples.append(time.perf_counter() - start)
        assert cell.result == "2", cell.error
        await manager.close(name)
    return median(samples)


async def new_actors(count: int) -> float:
    """The floor under a new Ray pad: a new bare actor on the same node, to its first call."""
    import ray

    samples = []
    for _ in range(count):
        start = time.perf_counter()
        actor: Any = ray.remote(Bare).options(**ON_NODE).remote()
        await actor.ping.remote()
        samples.append(time.perf_counter() - start)
        ray.kill(actor)
    return median(samples)


async def stream_mib(pad: ScratchpadRuntime, arrived: list[tuple[int, int]]) -> None:
    """Run a cell printing 1 MiB to its Cell; the characters streamed, and kept in the Cell,
    go to ``arrived``."""
    streamed, kept = 0, 0
    async for item in pad.execute_streaming(PRINT_MIB):
        if isinstance(item, OutputEvent):
            streamed += len(item.text)
        elif isinstance(item, Cell):
            kept = len(item.stdout)
    arrived.append((streamed, kept))


async def ray_pad_pids(manager: ScratchpadManager, name: str) -> tuple[list[int], list[int]]:
    """A Ray pad's processes: its actor's worker process with everything under it, and the
    kernel's tree alone."""
    actor = await manager.backend.find(name)  # type: ignore[attr-defined]
    kernel = int((await actor.state.remote())["pid"])
    return sorted({*tree(actor_process(kernel)), *tree(kernel)}), tree(kernel)


def local_pad_pids(pad: ScratchpadRuntime) -> list[int]:
    assert isinstance(pad, LocalRuntime) and pad.pid is not None
    return tree(pad.pid)


async def idle(
    manager: ScratchpadManager, prefix: str, count: int, pids: Callable[[str], Awaitable[list[int]]]
) -> tuple[int, int]:
    """Start ``count`` new pads at once, run one cell in each, let them settle: the RSS and
    the PSS of their processes, per pad; then close them."""
    names = [f"{prefix}{index}" for index in range(count)]
    started = await asyncio.gather(*(manager.get_or_create(name) for name in names))
    await asyncio.gather(*(pad.execute("1+1") for pad in started))
    await asyncio.sleep(1.0)  # let the kernels settle after their first cell
    every = sorted({pid for name in names for pid in await pids(name)})
    result = rss(every) // count, proportional(every) // count
    await asyncio.gather(*(manager.close(name) for name in names))
    return result


@dataclass
class Pads:
    """What the rows measure: a local and a Ray pad, their managers, the Ray pad's actor and
    a bare actor on the same node."""

    local: ScratchpadManager
    remote: ScratchpadManager
    local_pad: ScratchpadRuntime
    ray_pad: ScratchpadRuntime
    actor: Any  # the Ray pad's PadActor
    bare: Any  # a Bare actor

    def execute(self, code: str) -> Any:
        """``code`` run by the Ray pad's actor, its stream read here directly (no relay)."""
        return streaming(self.actor.execute, code, uuid.uuid4().hex, {}, (uuid.uuid4().hex, 0))

    async def raw(self, code: str) -> int:
        return await drain(self.execute(code))


async def round_trips(plan: Plan, pads: Pads, out: dict[str, Any]) -> None:
    bare, local_pad, ray_pad = pads.bare, pads.local_pad, pads.ray_pad
    kinds = out["kinds"] = await anatomy(pads.execute("1+1"))
    out["events"] = kinds["messages"][0]
    out["rtt"] = await interleaved(
        {
            "local": lambda: local_pad.execute("1+1"),
            "ray": lambda: ray_pad.execute("1+1"),
            "call": lambda: bare.ping.remote(),
            "stream1": lambda: drain(streaming(bare.stream, 1)),
            "stream2": lambda: drain(streaming(bare.stream, 2)),
            "streamN": lambda: drain(streaming(bare.stream, out["events"])),
            "raw": lambda: pads.raw("1+1"),
        },
        plan.round_trips,
    )
    out["tiny"] = await tiny_cells({"local": local_pad, "ray": ray_pad}, plan.tiny_cells)


async def output_mib(plan: Plan, pads: Pads, out: dict[str, Any]) -> None:
    bare = pads.bare
    kinds = out["mib_kinds"] = await anatomy(pads.execute(PRINT_MIB))
    copies = out["copies"] = round(sum(chars for _, chars in kinds.values()) / MIB)
    arrived: dict[str, list[tuple[int, int]]] = {"local": [], "ray": []}
    out["mib"] = await interleaved(
        {
            "local": lambda: stream_mib(pads.local_pad, arrived["local"]),
            "ray": lambda: stream_mib(pads.ray_pad, arrived["ray"]),
            "once": lambda: drain(streaming(bare.stream, 1, MIB)),
            "copies": lambda: drain(streaming(bare.stream, copies, MIB)),
            "raw": lambda: pads.raw(PRINT_MIB),
        },
        plan.streams,
        warmup=1,
    )
    out["arrived"] = {  # the least of every run
        key: (min(streamed for streamed, _ in runs), min(kept for _, kept in runs))
        for key, runs in arrived.items()
    }


async def memory(plan: Plan, pads: Pads, out: dict[str, Any]) -> None:
    local, remote = pads.local, pads.remote

    async def local_tree(name: str) -> list[int]:
        return local_pad_pids(local.get(name))

    async def ray_processes(name: str) -> list[int]:
        return (await ray_pad_pids(remote, name))[0]

    async def ray_kernel(name: str) -> list[int]:
        return (await ray_pad_pids(remote, name))[1]

    out["one"] = {
        "local": await idle(local, "one", 1, local_tree),
        "ray": await idle(remote, "one", 1, ray_processes),
        "ray_kernel": await idle(remote, "kernel", 1, ray_kernel),
    }
    out["many"] = {
        "local": await idle(local, "many", plan.many_pads, local_tree),
        "ray": await idle(remote, "many", plan.many_pads, ray_processes),
    }
    await pads.local_pad.reset()
    await pads.ray_pad.reset()
    await asyncio.sleep(1.0)  # idle: the reset kernels settled
    used = {"local": await local_tree("bench"), "ray": await ray_processes("bench")}
    out["used"] = {key: (rss(pids), proportional(pids)) for key, pids in used.items()}
    # the worker node's own processes (raylet, its agents, idle workers): not the pads'
    theirs = {*used["ray"], await pads.bare.pid.remote()}
    node = [pid for pid in tree(raylet_of(NODE)) if pid not in theirs]
    out["node"] = (rss(node), proportional(node))


async def measure(plan: Plan, home: Path, address: str) -> dict[str, Any]:
    import ray

    out: dict[str, Any] = {}
    ray_settings = Settings(
        home=home / "ray",
        backend="ray",
        ray_address=address,
        ray_namespace=f"bench-{uuid.uuid4().hex[:8]}",
    )
    async with (
        ScratchpadManager(settings=Settings(home=home / "local")) as local,
        ScratchpadManager(settings=ray_settings) as remote,
    ):
        start = time.perf_counter()
        ray_pad = await remote.get_or_create("bench", resources=PLACED)
        out["first_ray"] = time.perf_counter() - start  # joins the cluster, makes the actor
        bare: Any = ray.remote(Bare).options(**ON_NODE).remote()
        try:
            await bare.ping.remote()
            pads = Pads(
                local=local,
                remote=remote,
                local_pad=await local.get_or_create("bench"),
                ray_pad=ray_pad,
                actor=await remote.backend.find("bench"),  # type: ignore[attr-defined]
                bare=bare,
            )
            await round_trips(plan, pads, out)
            await output_mib(plan, pads, out)
            out["new"] = {
                "local": await new_pads(local, "new", plan.new_pads),
                "ray": await new_pads(remote, "new", plan.new_pads, resources=PLACED),
                "actor": await new_actors(plan.new_pads),
            }
            await memory(plan, pads, out)
        finally:
            ray.kill(bare)
    return out


# -- the table ------------------------------------------------------------------------------
def report(plan: Plan, out: dict[str, Any], quick: bool) -> None:
    import ray

    rtt, tiny, new, mib_times = out["rtt"], out["tiny"], out["new"], out["mib"]
    total = mem_total()
    print(
        f"Ray {ray.__version__}, Python {sys.version.split()[0]} on {os.cpu_count()} CPUs, "
        f"{total / GIB:.1f} GiB; Ray pads on the worker node of a head + 1 worker cluster "
        f"(127.0.0.1){'; --quick' if quick else ''}"
    )
    print(f"{'metric':52} {'ray':>12} {'local':>12}")

    def row(label: str, ray_value: str, local_value: str = "") -> None:
        print(f"{label:52} {ray_value:>12} {local_value:>12}")

    row(f"1+1 round trip (median of {plan.round_trips})", ms(rtt["ray"]), ms(rtt["local"]))
    row(f"{plan.tiny_cells} tiny cells (total, taking turns)", ms(tiny["ray"]), ms(tiny["local"]))
    row(f"new pad → first result (median of {plan.new_pads})", ms(new["ray"]), ms(new["local"]))
    row("first Ray pad of the server (joins the cluster)", ms(out["first_ray"]))
    row(
        f"print 1 MiB → its Cell (median of {plan.streams})",
        ms(mib_times["ray"]),
        ms(mib_times["local"]),
    )
    for what, index in (("streamed", 0), ("kept in the Cell", 1)):
        row(
            f"  characters {what} (least of {plan.streams + 1})",
            f"{out['arrived']['ray'][index]:,}",
            f"{out['arrived']['local'][index]:,}",
        )
    one, many_pads, used, count = out["one"], out["many"], out["used"], plan.many_pads
    row(
        "new idle pad: RSS (Ray: actor process + kernel tree)",
        mib(one["ray"][0]),
        mib(one["local"][0]),
    )
    row("new idle pad: PSS", mib(one["ray"][1]), mib(one["local"][1]))
    row("  of which its kernel tree: RSS", mib(one["ray_kernel"][0]))
    row("  of which its kernel tree: PSS", mib(one["ray_kernel"][1]))
    row("the pad that ran the rows above, reset: RSS", mib(used["ray"][0]), mib(used["local"][0]))
    row("the pad that ran the rows above, reset: PSS", mib(used["ray"][1]), mib(used["local"][1]))
    for what, index in (("RSS", 0), ("PSS", 1)):
        row(
            f"{count} idle pads at once: {what} per pad",
            mib(many_pads["ray"][index]),
            mib(many_pads["local"][index]),
        )
    row("a Ray node's own processes (raylet, agents): RSS", mib(out["node"][0]))
    row("a Ray node's own processes (raylet, agents): PSS", mib(out["node"][1]))
    gib = f"{total / GIB:.0f} GiB"
    row(f"pads per node of {gib}: RAM / a new pad's RSS", *fit(total, one, 0))
    row(f"pads per node of {gib}: RAM / PSS per pad of {count}", *fit(total, many_pads, 1))
    print()
    breakdown(plan, out)


def fit(total: int, measured: dict[str, Any], index: int) -> tuple[str, str]:
    return f"{total // measured['ray'][index]:,}", f"{total // measured['local'][index]:,}"


def breakdown(plan: Plan, out: dict[str, Any]) -> None:
    """Where the extra milliseconds of a Ray pad go, from the floors measured beside it."""
    rtt, mib_times, events = out["rtt"], out["mib"], out["events"]

    def line(label: str, seconds: float) -> None:
        print(f"{label:64} {ms(seconds):>12}")

    print(f"Where the extra milliseconds of a Ray 1+1 go (medians of {plan.round_trips}, same run)")
    line("local pad 1+1 (kernel of this machine)", rtt["local"])
    line("bare Ray actor call (async actor, same node)", rtt["call"])
    line("bare Ray streaming generator, 1 item", rtt["stream1"])
    line("bare Ray streaming generator, 2 items", rtt["stream2"])
    line(f"bare Ray streaming generator, {events} items (a 1+1 cell's messages)", rtt["streamN"])
    line("the pad actor's execute stream, read directly (no relay)", rtt["raw"])
    line("Ray pad 1+1 (RayRuntime: + relay into the server's watch)", rtt["ray"])
    print(
        f"  extra {ms(rtt['ray'] - rtt['local'])} = Ray stream of {events} items "
        f"{ms(rtt['streamN'])} + the pad in its actor beyond a local pad "
        f"{ms(rtt['raw'] - rtt['streamN'] - rtt['local'])} + relay here "
        f"{ms(rtt['ray'] - rtt['raw'])}"
    )
    copies = out["copies"]
    print(f"  (a 1+1 cell's stream: {told(out['kinds'])})")
    print(f"Where the extra milliseconds of a cell printing 1 MiB go (medians of {plan.streams})")
    print(f"  (its stream: {told(out['mib_kinds'])})")
    line("bare Ray streaming generator, one 1 MiB item", mib_times["once"])
    line(f"bare Ray streaming generator, {copies} items of 1 MiB", mib_times["copies"])
    line("the pad actor's execute stream, read directly (no relay)", mib_times["raw"])
    line("Ray pad (as in the table)", mib_times["ray"])
    line("local pad (as in the table)", mib_times["local"])
    new = out["new"]
    print(f"Where a new Ray pad's time goes (medians of {plan.new_pads})")
    line("new bare Ray actor (same node) → its first call", new["actor"])
    line("new local pad → first result", new["local"])
    line("new Ray pad → first result (as in the table)", new["ray"])


def mib(value: int) -> str:
    return f"{value / MIB:.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    # A driver would otherwise rewrite 127.0.0.1 to this machine's outward address (Ray's
    # "remotely reachable" rule) and never reach a cluster that listens on loopback only.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    # a cluster that asks for a token, as Scratchpad requires (a pad must not be able to use it)
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
    try:
        import ray  # noqa: F401
    except ImportError:
        print("bench/ray_backend.py needs Ray: pip install 'scratchpad[ray]' (or the dev extra)")
        return
    plan = QUICK if args.quick else FULL
    with tempfile.TemporaryDirectory(prefix="scratchpad-bench-") as tmp, cluster() as address:
        out = asyncio.run(measure(plan, Path(tmp), address))
    report(plan, out, args.quick)


if __name__ == "__main__":
    main()
