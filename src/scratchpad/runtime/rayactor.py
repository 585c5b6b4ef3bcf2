"""The Ray actor that holds one pad on the node Ray placed it on (SCRATCHPAD_BACKEND=ray).

The actor owns a :class:`LocalRuntime` (its sandbox, limits, checkpoints) whose directory is
in the store every node reaches, so an actor made again on another node starts from the
pad's requirements, history and checkpoint. A cell's caller gets one stream from
:meth:`PadActor.execute`: the cell's stream items and, in order with them, what the pad's
watch was told about the cell (queued, started, output seen, recorded), which the server's
own watch replays (raypad.py): journals, feeds and detached cells work there unchanged.

Nothing secret travels in the actor's name or its constructor's arguments (which Ray's
dashboard shows): a pad's vault variables arrive as arguments of :meth:`start` and
:meth:`update_secrets` (direct calls, never objects in Ray's store) and live in this
process's memory only, for the kernel's environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from scratchpad.config import Settings
from scratchpad.padnames import dir_in
from scratchpad.runtime import handle as handles
from scratchpad.runtime import workdir
from scratchpad.runtime.base import PadLLM
from scratchpad.runtime.cell import Cell, StreamItem
from scratchpad.runtime.limits import PadLimits
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.watch import PadWatch
from scratchpad.scrub import register

Tap = Callable[[tuple[str, Any]], None]
BATCH_EVENTS = 256  # events sent in one message, at most


class RelayWatch(PadWatch):
    """The actor's pad watch; it also hands each event of a cell to that cell's caller."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.taps: dict[str, Tap] = {}

    def _tap(self, cell_id: str, event: tuple[str, Any]) -> None:
        tap = self.taps.get(cell_id)
        if tap is not None:
            tap(event)

    def queued(self, cell: Cell) -> None:
        super().queued(cell)
        self._tap(cell.id, ("queued", cell))

    def started(self, cell: Cell) -> None:
        super().started(cell)
        self._tap(cell.id, ("started", cell))

    def seen(self, items: list[StreamItem]) -> list[StreamItem]:
        running = self.running
        if running is not None:
            shown = [item for item in items if not isinstance(item, Cell)]
            if shown:
                self._tap(running.cell.id, ("seen", shown))
        return super().seen(items)

    def recorded(self, cell: Cell) -> None:
        super().recorded(cell)
        self._tap(cell.id, ("recorded", cell))

    def gone(self, cell: Cell) -> None:
        super().gone(cell)
        self._tap(cell.id, ("gone", cell))

    def status(self, pad: Any, status: str | None = None) -> None:
        super().status(pad, status)
        for tap in list(self.taps.values()):
            tap(("gen", getattr(pad, "generation", 0)))


class PadActor:
    """One pad, held by a detached, named Ray actor (see raybackend.py for its options)."""

    def __init__(
        self, name: str, settings: dict[str, Any], limits: dict[str, Any], cwd: str | None
    ) -> None:
        self.settings = Settings.model_validate(settings)
        store = self.settings.home
        self._secrets: dict[str, str] = {}
        self.pad = LocalRuntime(
            name, root=dir_in(store / "pads", name),
            cwd=workdir.pad_workdir(store, name) if cwd is None else Path(cwd),
            own_cwd=cwd is None, settings=self.settings, secret_env=lambda: dict(self._secrets),
            guarded=ray_paths(),
        )  # fmt: skip
        self.watch = RelayWatch(name)
        self.pad.watch = self.watch
        if limits:
            self.pad.set_limits(PadLimits.from_settings(self.settings).changed(limits))
        self._cells: set[asyncio.Task[None]] = set()

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self, secrets: dict[str, str]) -> dict[str, Any]:
        """Start the kernel (restoring the pad's variables from its checkpoint) with the
        pad's vault variables; how the pad stands."""
        self._learn(secrets)
        await self.pad.start()
        return self.state()

    def state(self) -> dict[str, Any]:
        """How the pad stands: for the server's listing and its status events."""
        import ray

        pad = self.pad
        return {
            "closed": pad.closed, "busy": pad.busy, "queued": pad.queued,
            "generation": pad.generation, "pid": pad.pid,
            "node": ray.get_runtime_context().get_node_id(),
        }  # fmt: skip

    async def update_secrets(self, secrets: dict[str, str]) -> bool:
        """Rotation: the kernel's vault variables are ``secrets`` from now on."""
        self._learn(secrets)
        return bool(await self.pad.update_secrets(secrets))

    def _learn(self, secrets: dict[str, str]) -> None:
        register((value, name) for name, value in secrets.items())
        self._secrets = dict(secrets)

    async def close(self, reason: str) -> None:
        await self.pad.close(reason=reason)

    async def cleanup(self) -> None:
        await self.pad.cleanup()

    async def reset(self) -> None:
        await self.pad.reset()

    async def sleep_if_idle(self, now: float) -> bool:
        return await self.pad.sleep_if_idle(now)

    async def revert(self) -> int:
        return await self.pad.revert()

    async def fork_into(self, target: str) -> None:
        """Copy this pad into new pad ``target`` in the store (its venv built here)."""
        store = self.settings.home
        copy = LocalRuntime(
            target, root=dir_in(store / "pads", target), cwd=workdir.pad_workdir(store, target),
            own_cwd=True, settings=self.settings,
        )  # fmt: skip
        await self.pad.fork_into(copy)

    async def install(self, packages: list[str]) -> str:
        return await self.pad.install_packages(packages)

    async def configure_llm(self, llm: PadLLM) -> None:
        if llm.api_key:
            register([(llm.api_key, "the pad's model key")])
        await self.pad.configure_llm(llm)

    async def cancel(self, cell_id: str | None) -> bool:
        return await self.pad.cancel(cell_id)

    def set_limits(self, limits: dict[str, Any]) -> None:
        self.pad.set_limits(self.pad.limits.changed(limits))

    async def cells(self) -> list[Cell]:
        return list(await self.pad.load_cells())

    def ping(self) -> float:
        return time.time()

    # -- cells ------------------------------------------------------------------------------
    async def execute(
        self, code: str, cell_id: str, options: dict[str, Any]
    ) -> AsyncIterator[list[tuple[str, Any]]]:
        """Run a cell: ``("gen", n)`` first, then in order ``("queued"|"started"|"recorded"
        |"gone", cell)``, ``("seen", items)`` and the caller's ``("item", item)``s, in lists
        of what came at once. The cell runs to its end whether or not the caller stays (at
        most once: never again)."""
        events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.watch.taps[cell_id] = events.put_nowait

        async def drive() -> None:
            try:
                async for item in self.pad.execute_streaming(code, cell_id=cell_id, **options):
                    events.put_nowait(("item", item))
            except Exception as exc:  # said to the caller, raised there
                events.put_nowait(("error", exc))
            finally:
                events.put_nowait(("end", None))
                if self.watch.taps.get(cell_id) == events.put_nowait:
                    del self.watch.taps[cell_id]

        task = asyncio.get_running_loop().create_task(drive())
        self._cells.add(task)
        task.add_done_callback(self._cells.discard)
        yield [("gen", self.pad.generation)]
        while True:  # what is there at once goes in one message (a Ray message costs ~0.5 ms)
            batch = [await events.get()]
            while not events.empty() and len(batch) < BATCH_EVENTS:
                batch.append(events.get_nowait())
            ended = next((i for i, (kind, _) in enumerate(batch) if kind in ("end", "error")), None)
            if ended is None:
                yield batch
                continue
            if ended:
                yield batch[:ended]
            kind, value = batch[ended]
            if kind == "error":
                raise value
            return

    async def follow(self, cell_id: str, after: int) -> AsyncIterator[Any]:
        """Cell ``cell_id``'s numbered frames after ``after`` (its journal here, live, then
        its record; a ``resync`` frame where the journal moved on): for a caller in another
        process, which cannot be handed a stream this actor already gives someone else."""
        cell = await handles.find(self.pad, cell_id)
        async for frame in cell.events(after):
            yield frame

    async def peek(self, cell_id: str) -> Any:
        """How cell ``cell_id`` stands (see CellHandle.peek)."""
        return await (await handles.find(self.pad, cell_id)).peek()


def store_settings(settings: Settings, store: Path) -> dict[str, Any]:
    """What an actor is given of the server's settings: the store as its home, and none of
    the server's keys (Ray shows an actor's arguments to whoever reaches its dashboard)."""
    kept = settings.model_copy(
        update={"home": store, "api_key": None, "remote_api_key": None, "vault_key": None,
                "backend": "local", "observations_db": None}
    )  # fmt: skip
    return kept.model_dump(mode="json")


def ray_paths() -> tuple[Path, ...]:
    """What of Ray's a pad must not reach: its session files (the raylet's and the object
    store's sockets, ports, logs) and the cluster's token."""
    import ray

    paths = [Path.home() / ".ray"]
    with contextlib.suppress(Exception):
        node: Any = ray._private.worker._global_node
        paths.append(Path(node.get_temp_dir_path()))
    token = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if token:
        paths.append(Path(token).parent)
    return tuple(path for path in paths if path.exists() and path != Path("/"))
