"""The Ray actor that holds one pad on the node Ray placed it on (SCRATCHPAD_BACKEND=ray).

The actor owns a :class:`LocalRuntime` (its sandbox, limits, checkpoints) whose directory is
in the store every node reaches, so an actor made again on another node starts from the
pad's requirements, history and checkpoint. A cell's caller gets one stream from
:meth:`PadActor.execute`: the cell's stream items and, in order with them, what the pad's
watch was told about the cell (queued, started, recorded), which the server's own watch
replays with the output items (raypad.py): journals, feeds and detached cells work there
unchanged. The actor sleeps by itself when its pad is idle, and goes.

Nothing secret travels in the actor's name or its constructor's arguments (which Ray keeps
with the actor, for whoever reaches the cluster): a pad's vault variables arrive as arguments
of :meth:`start` and :meth:`update_secrets` (direct calls, never objects in Ray's store) and
live in this process's memory only, for the kernel's environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from scratchpad._version import __version__
from scratchpad.config import Settings
from scratchpad.errors import PadAsleepError
from scratchpad.padnames import dir_in
from scratchpad.runtime import handle as handles
from scratchpad.runtime import workdir
from scratchpad.runtime.base import PadLLM
from scratchpad.runtime.cell import CELL_FIELDS, Cell
from scratchpad.runtime.limits import PadLimits
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.proctree import tree_rss
from scratchpad.runtime.watch import PadWatch
from scratchpad.scrub import register

log = logging.getLogger(__name__)
Tap = Callable[[tuple[str, Any]], None]
BATCH_EVENTS = 256  # events sent in one message, at most
SLEEP_CHECK_MAX_S = 60.0  # an actor looks at its pad at least this often
LEAVE_AFTER_S = 0.2  # an actor that fell asleep answers its caller, then goes
TURN_WAIT_S = 5.0  # how long a cell waits for one its caller sent before it


def as_it_begins(cell: Cell) -> Cell:
    """A copy of ``cell`` as it stands before it runs (the cell itself fills up before Ray
    sends the event on: its output must not travel twice)."""
    return replace(cell, stdout="", stderr="", outputs=[], outputs_at=[], result_data={})


class RelayWatch(PadWatch):
    """The actor's pad watch; it also hands each event of a cell to that cell's caller (the
    output it sees is what the caller gets as items: the caller's watch sees those)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.taps: dict[str, Tap] = {}

    def _tap(self, cell_id: str, event: tuple[str, Any]) -> None:
        tap = self.taps.get(cell_id)
        if tap is not None:
            tap(event)

    def queued(self, cell: Cell) -> None:
        super().queued(cell)
        self._tap(cell.id, ("queued", as_it_begins(cell)))

    def started(self, cell: Cell) -> None:
        super().started(cell)
        self._tap(cell.id, ("started", as_it_begins(cell)))

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


class Turns:
    """The cells of one caller queued in the order it sent them: an async actor may start
    its calls in any order, and a pad's cells run in the order they were submitted."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}  # caller → the number whose turn it is
        self._changed = asyncio.Event()

    async def wait(self, caller: str, number: int) -> None:
        """Until the caller's cells before ``number`` were queued (or gave up), at most
        ``TURN_WAIT_S``: a call that never came holds nothing up for long."""
        deadline = asyncio.get_running_loop().time() + TURN_WAIT_S
        while self._next.get(caller, 0) < number:
            changed, left = self._changed, deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), left)

    def expect(self, caller: str, number: int) -> None:
        """The first cell ``caller`` sends this actor is its ``number`` (a caller met for
        the first time need not wait for the cells it sent to an earlier actor)."""
        self._next.setdefault(caller, number)

    def done(self, caller: str, number: int) -> None:
        """Cell ``number`` of ``caller`` is queued (or will never be): the next one's turn."""
        if self._next.get(caller, 0) <= number:
            self._next[caller] = number + 1
            self._changed.set()
            self._changed = asyncio.Event()


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
        self._turns = Turns()
        self._sleeper: asyncio.Task[None] | None = None
        self._leaving = False  # asleep: the actor goes; nothing more reaches the pad

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self, secrets: dict[str, str], order: tuple[str, int]) -> dict[str, Any]:
        """Start the kernel (restoring the pad's variables from its checkpoint) with the
        pad's vault variables; how the pad stands. ``order``: the caller, and the number of
        the next cell it will send (see Turns)."""
        self._turns.expect(*order)
        self._learn(secrets)
        self._check_staying()
        await self.pad.start()
        after = self.settings.sleep_after_s
        if after > 0 and self._sleeper is None:
            self._sleeper = asyncio.get_running_loop().create_task(self._sleep_when_idle(after))
        return self.state()

    async def _sleep_when_idle(self, after: float) -> None:
        """The actor's own sleeper: an idle pad sleeps (its kernel saves everything and
        stops) and the actor goes, freeing its node, whether or not a server runs."""
        every = min(SLEEP_CHECK_MAX_S, after / 4)
        while not self._leaving:
            await asyncio.sleep(every)
            try:
                await self.sleep_if_idle(time.time())
            except Exception:  # trouble sleeping: try again later, never die of it
                log.exception("pad %r could not go to sleep", self.pad.name)

    def _check_staying(self) -> None:
        if self._leaving:
            raise PadAsleepError(
                f"pad {self.pad.name!r} fell asleep and its actor is leaving; ask again"
            )

    def state(self) -> dict[str, Any]:
        """How the pad stands: for the server's listing and its status events."""
        import ray

        pad = self.pad
        return {
            "closed": pad.closed, "busy": pad.busy, "queued": pad.queued,
            "generation": pad.generation, "pid": pad.pid, "version": __version__,
            "node": ray.get_runtime_context().get_node_id(),
            "memory_bytes": None if pad.pid is None else tree_rss(pad.pid),
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
        self._check_staying()
        await self.pad.reset()

    async def sleep_if_idle(self, now: float) -> bool:
        """Put the pad to sleep when it has been idle long enough (see LocalRuntime) and
        nothing follows one of its cells; then the actor goes. Whether it went to sleep."""
        if self._leaving:
            return True
        if self.watch.attached or not await self.pad.sleep_if_idle(now):
            return False
        if self.pad.busy or self.pad.queued:  # a cell came while it saved: that woke it
            return False
        self._leaving = True  # from here on nothing reaches the pad (PadAsleepError)
        asyncio.get_running_loop().call_later(LEAVE_AFTER_S, self._leave)
        return True

    def _leave(self) -> None:
        import ray

        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    async def revert(self) -> int:
        self._check_staying()
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
        self._check_staying()
        return await self.pad.install_packages(packages)

    async def configure_llm(self, llm: PadLLM) -> None:
        if llm.api_key:
            register([(llm.api_key, "the pad's model key")])
        await self.pad.configure_llm(llm)

    async def cancel(self, cell_id: str | None) -> bool:
        return await self.pad.cancel(cell_id)

    def set_limits(self, limits: dict[str, Any]) -> None:
        self.pad.set_limits(self.pad.limits.changed(limits))

    async def rescrub(self, scrubbed: list[Cell]) -> tuple[int, bool]:
        """Take the server's scrubbed copies of cells (it knows secrets this process does
        not; what it sends holds none) in memory and in the history, by id."""
        by_id = {cell.id: cell for cell in scrubbed}

        def adopt(cell: Cell) -> bool:
            new = by_id.get(cell.id)
            if new is None or new == cell:
                return False
            for name in CELL_FIELDS:
                setattr(cell, name, getattr(new, name))
            return True

        return await self.pad.rescrub(adopt)

    async def cells(self) -> list[Cell]:
        return list(await self.pad.load_cells())

    def ping(self) -> float:
        return time.time()

    # -- cells ------------------------------------------------------------------------------
    async def execute(
        self, code: str, cell_id: str, options: dict[str, Any], order: tuple[str, int]
    ) -> AsyncIterator[list[tuple[str, Any]]]:
        """Run a cell: ``("gen", n)`` first, then in order ``("queued"|"started"|"recorded"
        |"gone", cell)`` and the caller's ``("item", item)``s, in lists of what came at once;
        the recorded cell comes once (as the item, ``("same", id)``). The cell runs to its
        end whether or not the caller stays (at most once: never again). ``order``: (the
        caller, the number of this cell among the ones it sent), queued in that order."""
        self._check_staying()
        await self._turns.wait(*order)
        events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        events.put_nowait(("gen", self.pad.generation))

        def tap(event: tuple[str, Any]) -> None:
            events.put_nowait(event)
            if event[0] == "queued":
                self._turns.done(*order)

        self.watch.taps[cell_id] = tap

        async def drive() -> None:
            try:
                async for item in self.pad.execute_streaming(code, cell_id=cell_id, **options):
                    events.put_nowait(("item", item))
            except Exception as exc:  # said to the caller, raised there
                events.put_nowait(("error", exc))
            finally:
                self._turns.done(*order)  # queued, or it never will be
                events.put_nowait(("end", None))
                if self.watch.taps.get(cell_id) is tap:
                    del self.watch.taps[cell_id]

        task = asyncio.get_running_loop().create_task(drive())
        self._cells.add(task)
        task.add_done_callback(self._cells.discard)
        recorded: set[str] = set()
        while True:  # what is there at once goes in one message (a Ray message costs ~0.5 ms)
            batch = [await events.get()]
            while not events.empty() and len(batch) < BATCH_EVENTS:
                batch.append(events.get_nowait())
            batch = [once(event, recorded) for event in batch]
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
        self.watch.journals.attached += 1  # someone follows: the pad stays awake
        try:
            async for frame in cell.events(after):
                yield frame
        finally:
            self.watch.journals.attached -= 1

    async def peek(self, cell_id: str) -> Any:
        """How cell ``cell_id`` stands (see CellHandle.peek)."""
        return await (await handles.find(self.pad, cell_id)).peek()


def store_settings(settings: Settings, store: Path) -> dict[str, Any]:
    """What an actor is given of the server's settings: the store as its home, and none of
    the server's keys (Ray keeps an actor's arguments, for whoever reaches the cluster)."""
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


def once(event: tuple[str, Any], recorded: set[str]) -> tuple[str, Any]:
    """``event``, or a reference to the recorded cell it repeats (sent once)."""
    kind, value = event
    if kind == "recorded":
        recorded.add(value.id)
    elif kind == "item" and isinstance(value, Cell) and value.id in recorded:
        return "same", value.id
    return event
