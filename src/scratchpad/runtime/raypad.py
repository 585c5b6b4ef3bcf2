"""A pad on a Ray cluster, as the server holds it: the runtime that talks to the pad's actor.

Every call goes to the actor (rayactor.py) named after the pad; a cell's stream comes back
through a Ray streaming generator, and what the actor's watch was told about the cell is
replayed into this server's watch as it arrives, so journals, feeds, detached cells and the
web UI work as for a local pad. The actor is found or made at :meth:`start` (``get_if_exists``:
a restarted or a second server finds the same one).

A node that dies takes its pads' kernels with it: the running cell is recorded ``killed``
with the cause ("the node ... was lost"), this runtime is closed, and the manager's next use
makes the actor again where Ray finds room; its constructor starts from the store. A cell is
never sent twice (``max_task_retries=0``, no retry here).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scratchpad.errors import ClusterError, PadAsleepError, PadClosedError, PadError
from scratchpad.runtime import venv, workdir
from scratchpad.runtime.base import (
    CLOSED,
    PadLLM,
    ScratchpadRuntime,
    check_cell_id,
    check_execute_args,
)
from scratchpad.runtime.cell import (
    Cell,
    DisplayEvent,
    OutputEvent,
    ProgressEvent,
    StreamItem,
    new_cell_id,
)
from scratchpad.runtime.handle import CellHandle
from scratchpad.runtime.history import CellHistory
from scratchpad.runtime.padinfo import HISTORY
from scratchpad.runtime.padstate import read_state
from scratchpad.runtime.rescrub import rescrub_history, scrub_cell
from scratchpad.runtime.watch import PadWatch
from scratchpad.scrub import scrub_bundle, scrubber

if TYPE_CHECKING:
    from scratchpad.runtime.placement import PadResources
    from scratchpad.runtime.raybackend import RayBackend

log = logging.getLogger(__name__)
WAKE_TRIES = 20  # an actor found as it leaves is waited for this many times
WAKE_PAUSE_S = 0.25
NODE_LOST = (
    "The pad's node was lost ({cause}): its kernel went with it, and this cell's output and "
    "variables with them. The pad comes back on a live node at its next use, with its "
    "packages and the variables of its last checkpoint.\n"
)
ACTOR_GONE = (
    "The pad's actor stopped ({cause}: closed or removed elsewhere, or killed), and this "
    "cell did not finish there. The pad comes back at its next use, with its packages and "
    "the variables of its last checkpoint (unless it was removed).\n"
)


class RayRuntime(ScratchpadRuntime):
    """Pad ``name``, held by its actor on a node of the cluster ``backend`` reaches."""

    def __init__(self, name: str, *, backend: RayBackend) -> None:
        super().__init__(name, compact_keep=backend.settings.compact_keep_cells)
        self.backend = backend
        self.settings = backend.settings
        self.root = backend.root(name)  # in the store every node reaches
        where = backend.cwd_of(name)
        self.own_cwd = where is None
        self.cwd = workdir.pad_workdir(backend.home, name) if where is None else Path(where)
        self.watch = PadWatch(name)  # the manager's, shared by name
        self.on_wake: Callable[[ScratchpadRuntime], None] | None = None
        self.resources: PadResources = backend.default_resources
        self.limits: dict[str, object] = {}  # asked of the pad's kernel, beside the resources
        self.generation = 0
        self.node: str | None = None  # the Ray node the actor runs on
        self._actor: Any = None
        self._closed = True
        self._asleep = False
        self._removed = False
        self._loaded = False
        self._following: set[asyncio.Task[None]] = set()  # cells followed from the actor
        self._sending: set[str] = set()  # cells on their way to the actor
        self._caller = uuid.uuid4().hex  # cells are queued in the order this runtime sent them
        self._sent = 0
        self._forbidden: set[str] = set()  # of those, the ones cancelled on the way

    # -- how it stands ----------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self.watch.running is not None

    @property
    def queued(self) -> int:
        return len(self.watch.queue)

    @property
    def closed(self) -> bool:
        return self._closed

    def knows(self, cell_id: str) -> bool:
        return self.watch.journals.get(cell_id) is not None or any(
            cell.id == cell_id for cell in self.cells
        )

    def ensure_cwd(self) -> Path:
        """The kernel's working directory (its own, in the store, is made when missing;
        blocks)."""
        return workdir.ensure(self.cwd) if self.own_cwd else self.cwd

    async def load_cells(self) -> list[Cell]:
        if self._actor is not None and not self._closed:
            with contextlib.suppress(PadAsleepError):  # else: from the store, below
                cells = await self._call(self._actor.cells.remote())
                self.cells = [scrubbed(cell) for cell in cells]
                self._loaded = True
                return self.cells
        if not self._loaded or self._actor is None:
            history = CellHistory(self.root / HISTORY, self.settings.history_max_bytes)
            self.cells = await asyncio.to_thread(history.load)
        self._loaded = True
        return self.cells

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        """Find the pad's actor or make it (on a node with the resources it asks for), and
        start its kernel with the pad's vault variables."""
        if self._removed:
            raise PadClosedError(f"pad {self.name!r} was removed; create it again to use it")
        woke = self._asleep
        for _ in range(WAKE_TRIES):
            actor = await self.backend.actor(self.name, self.resources, self.limits)
            try:
                secrets = self.backend.secrets(self.name)
                state = await self._call(actor.start.remote(secrets, (self._caller, self._sent)))
                break
            except PadAsleepError:  # found as it leaves: once it is gone, a new one
                await self.backend.kill(actor)
                await asyncio.sleep(WAKE_PAUSE_S)
        else:
            raise PadError(f"pad {self.name!r}: its actor kept leaving as it was started")
        self._actor, self._closed, self._asleep = actor, False, False
        self._stand(state)
        await self.load_cells()
        self.watch.status(self)
        if woke and self.on_wake is not None:
            self.on_wake(self)

    def _stand(self, state: Mapping[str, Any]) -> None:
        self.generation = int(state.get("generation", self.generation))
        self.node = state.get("node", self.node)

    async def close(self, *, reason: str = CLOSED) -> None:
        """Stop the kernel (after a full checkpoint) and the actor: the pad holds nothing on
        the cluster until its next use; its directory stays in the store."""
        actor, self._actor, self._closed = self._actor, None, True
        if actor is None:
            return
        try:
            await self._call(actor.close.remote(reason))
        except PadError:
            pass  # its node is gone already: nothing is left to stop
        finally:
            await self.backend.kill(actor)
        self.watch.status(self)

    async def detach(self) -> None:
        """Let go; the actor keeps the pad running for the next server (or another one)."""
        self._actor, self._closed = None, True

    async def cleanup(self) -> None:
        """Stop the pad wherever its actor runs, and delete its directories in the store."""
        actor = self._actor or await self.backend.find(self.name)
        self._actor, self._closed, self._removed = None, True, True
        if actor is not None:
            try:
                await self._call(actor.cleanup.remote())
            except PadError:
                pass  # its node is gone: the store's files are removed below
            finally:
                await self.backend.kill(actor)
        if self.own_cwd:
            await workdir.remove(self.cwd)
        await venv.remove(self.root)
        self.watch.status(self, "removed")

    async def rescrub(self) -> tuple[int, bool]:
        """Scrub the pad's cells again with this server's scrubber (a secret was added):
        those held here in place; the history in the store through the actor, which owns
        it while it runs, given the scrubbed copies of the cells that changed (secrets
        never travel: only what no longer holds them). Without an actor, the file here."""
        scrub = scrubber()
        changed = sum(scrub_cell(scrub, cell) for cell in self.cells)
        history = CellHistory(self.root / HISTORY, self.settings.history_max_bytes)
        if self._actor is None:
            return changed, await asyncio.to_thread(rescrub_history, history, scrub)
        stored = await asyncio.to_thread(history.load)
        fixed = [cell for cell in stored if scrub_cell(scrub, cell)]
        if not fixed:
            return changed, False
        try:
            _, rewritten = await self._call(self._actor.rescrub.remote(fixed))
        except PadAsleepError:  # it went meanwhile: nobody writes the file now
            return changed, await asyncio.to_thread(rescrub_history, history, scrub)
        return changed, bool(rewritten)

    async def reset(self) -> None:
        await self._ask("reset")
        self.cells = []

    async def sleep_if_idle(self, now: float) -> bool:
        """Asleep, a pad holds no actor: its kernel saves everything and stops, then the
        actor goes; its next use makes a new one that restores from the store."""
        if self._actor is None or self._closed or self.watch.watched or self.watch.attached:
            return False
        actor = self._actor
        try:
            if not await self._call(actor.sleep_if_idle.remote(now)):
                return False
        except PadAsleepError:
            pass  # it went to sleep by itself
        self._actor, self._closed, self._asleep = None, True, True
        await self.backend.kill(actor)
        self.watch.status(self, "asleep")
        return True

    async def revert(self) -> int:
        number: int = await self._ask("revert")
        return number

    async def fork_into(self, target: ScratchpadRuntime) -> None:
        if not isinstance(target, RayRuntime):
            raise PadError(f"pad {self.name!r} runs on Ray: it can only be forked into a Ray pad")
        if self._actor is None or self._closed:
            await self.start()  # the source's actor takes the copy, in its turn
        await self._ask("fork_into", target.name)

    async def install_packages(self, packages: list[str]) -> str:
        output: str = await self._ask("install", list(packages))
        return output

    async def configure_llm(self, llm: PadLLM) -> None:
        await self._ask("configure_llm", llm)

    async def update_secrets(self, env: dict[str, str]) -> bool:
        if self._actor is None or self._closed:
            return False  # the next start gives them
        try:
            changed: bool = await self._call(self._actor.update_secrets.remote(env))
        except PadAsleepError:
            return False  # the next start gives them
        return changed

    def set_limits(self, limits: Mapping[str, object]) -> None:
        """The pad's own limits from its next kernel on (sent to a running actor at once)."""
        self.limits = {**self.limits, **limits}
        if self._actor is not None and not self._closed:
            self._actor.set_limits.remote(dict(limits))

    async def cancel(self, cell_id: str | None = None) -> bool:
        """See ScratchpadRuntime.cancel. A cell this runtime is still sending counts as
        there: its id is forbidden at the actor (before or after it arrives), so it never
        runs."""
        on_its_way = cell_id is not None and cell_id in self._sending
        if on_its_way:
            self._forbidden.add(str(cell_id))
        if self._actor is None or self._closed:
            return on_its_way
        try:
            cancelled: bool = await self._call(self._actor.cancel.remote(cell_id))
        except PadAsleepError:
            return on_its_way  # asleep: nothing runs
        return cancelled or on_its_way

    # -- cells ------------------------------------------------------------------------------
    async def execute_streaming(
        self,
        code: str,
        *,
        description: str = "",
        estimated_time: str = "",
        estimated_seconds: float = 0.0,
        timeout_s: float | None = None,
        cell_id: str | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        request = check_execute_args(
            code, description, estimated_seconds, estimated_time, cell_id, timeout_s
        )
        cell_id = request.cell_id or new_cell_id()
        options = {
            "description": request.description, "estimated_time": request.estimated_time,
            "estimated_seconds": request.estimated_seconds, "timeout_s": request.timeout_s,
        }  # fmt: skip
        self._sending.add(cell_id)
        try:
            stream = self._execute(request.code, request.description, cell_id, options)
            async with contextlib.aclosing(stream):
                async for item in stream:
                    yield item
        finally:
            self._sending.discard(cell_id)
            self._forbidden.discard(cell_id)

    async def _execute(
        self, code: str, description: str, cell_id: str, options: dict[str, Any]
    ) -> AsyncGenerator[StreamItem, None]:
        """The cell's stream from the actor, relayed (see :meth:`execute_streaming`)."""
        started: Cell | None = None
        recorded: dict[str, Cell] = {}
        for again in (False, True):
            actor = await self._awake()
            if cell_id in self._forbidden:  # cancelled before the actor was there
                await actor.cancel.remote(cell_id)
            stream = actor.execute.remote(code, cell_id, options, self._order())
            heard = ended = False
            try:
                async for ref in stream:
                    batch = await ref
                    heard = True
                    for kind, value in batch:
                        value = scrubbed(value)
                        if kind == "same":
                            kind, value = "item", recorded[value]
                        if kind == "item":
                            if isinstance(value, Cell):
                                ended = True
                                self._remember(value)
                            else:
                                self.watch.seen([value])
                            yield value
                        elif kind == "recorded":
                            recorded[value.id] = value
                            self.watch.recorded(value)
                        elif kind == "started":
                            started = value
                            self.watch.started(value)
                        else:
                            self._relay(kind, value)
                ended = True
                return
            except Exception as exc:
                ended = True
                if not heard and not again and await self._slept(exc):
                    continue  # it never reached the pad: asked again of a new actor
                lost = await self.backend.lost(exc, actor)
                if lost is None:
                    raise self.backend.unwrapped(exc, self.name) from None
                yield await self._killed(code, description, cell_id, started, lost)
                return
            finally:
                if not ended:  # the caller went away: the cell runs on, nobody reads its stream
                    self.backend.stop_stream(stream)

    async def cell(self, cell_id: str) -> CellHandle:
        """A handle on cell ``cell_id``: from this server's journal, into which a cell that
        another process started is followed from the actor's first (:meth:`follow`)."""
        await self.follow(str(check_cell_id(cell_id)))
        return await super().cell(cell_id)

    async def follow(self, cell_id: str) -> None:
        """Follow cell ``cell_id`` of the pad's live actor (this server's or another's) into
        this server's journal of it, when this server has none: the actor replays its own
        journal, then goes on live. Nothing when no actor runs or it has no such cell."""
        if self.watch.journals.get(cell_id) is not None:
            return
        actor = self._actor if not self._closed else None
        actor = actor or await self.backend.find(self.name)
        if actor is None:
            return
        frames = actor.follow.remote(cell_id, 0).__aiter__()
        try:
            first = await (await frames.__anext__())
        except StopAsyncIteration:
            return
        except Exception:  # no such cell there, or the actor went: the history tells
            return
        if self.watch.journals.get(cell_id) is not None:
            return  # found meanwhile (it started here)
        journal = self.watch.journals.open(cell_id)
        journal.gen, journal.ran = first.gen, True
        journal.append(first.event, first.size, first.gen)

        async def more() -> None:
            try:
                async for ref in frames:
                    frame = await ref
                    journal.append(frame.event, frame.size, frame.gen)
            except Exception as exc:  # the actor went: the journal stays as it was told
                log.info("following cell %s of pad %r ended: %r", cell_id, self.name, exc)

        if journal.terminal is None:
            task = asyncio.get_running_loop().create_task(more())
            self._following.add(task)
            task.add_done_callback(self._following.discard)

    def _order(self) -> tuple[str, int]:
        """This runtime and the number of the cell it sends now (see rayactor.Turns)."""
        self._sent += 1
        return self._caller, self._sent - 1

    def _relay(self, kind: str, value: Any) -> None:
        """Replay one event of the actor's watch into this server's watch."""
        if kind == "gen":
            if value != self.generation:
                self.generation = value
                self.watch.status(self)
        elif kind == "queued":
            self.watch.queued(value)
        elif kind == "gone":
            self.watch.gone(value)

    def _remember(self, cell: Cell) -> None:
        if not any(known.id == cell.id for known in self.cells[-8:]):
            self.cells.append(cell)

    async def _killed(
        self, code: str, description: str, cell_id: str, started: Cell | None, cause: str
    ) -> Cell:
        """The cell a lost node took: recorded ``killed`` (in the store's history too, as
        its kernel would have), and this runtime closed: the next use makes a new actor."""
        self._actor, self._closed = None, True
        cell = started or Cell(code=code, description=description, id=cell_id)
        cell.status = "killed"
        lost = NODE_LOST if cause.startswith("node lost") else ACTOR_GONE
        cell.error = lost.format(cause=cause)
        if started is not None:
            cell.duration_s = max(0.0, time.time() - (self._started_at(cell) or time.time()))
        history = CellHistory(self.root / HISTORY, self.settings.history_max_bytes)
        if cell.number:  # it had its number: the history has room for it
            await asyncio.to_thread(history.append, cell)
        self._remember(cell)
        if self.watch.queue.get(cell.id) is not None or self.busy:
            self.watch.recorded(cell)
        self.watch.status(self, "dead")
        return cell

    def _started_at(self, cell: Cell) -> float | None:
        running = self.watch.running
        return running.started_at if running is not None and running.cell.id == cell.id else None

    # -- Ray calls --------------------------------------------------------------------------
    async def _awake(self) -> Any:
        """The pad's actor: made again when it fell asleep (by itself, or put to sleep);
        PadClosedError for a pad closed or removed on purpose."""
        if self._removed or (self._closed and not self._asleep):
            raise PadClosedError(
                f"pad {self.name!r} is closed (or its node was lost); get it again from the "
                "manager to start it"
            )
        if self._actor is None:
            await self.start()  # a holder of a pad that fell asleep wakes it
        return self._actor

    async def _ask(self, method: str, *args: Any) -> Any:
        """Call the actor's ``method``; an actor that fell asleep meanwhile is made again and
        asked there (what was asked never reached its pad)."""
        for again in (False, True):
            actor = await self._awake()
            try:
                return await getattr(actor, method).remote(*args)
            except Exception as exc:
                if not again and await self._slept(exc):
                    continue
                raise await self._failure(exc, actor) from None
        raise AssertionError("unreachable")

    async def _slept(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the actor fell asleep and went before the call reached its
        pad (then this runtime is asleep: its next call makes a new actor)."""
        asleep = isinstance(self.backend.unwrapped(exc, self.name), PadAsleepError)
        if not asleep and self.backend.died(exc):  # gone: it went to sleep, or was lost
            asleep = (await asyncio.to_thread(read_state, self.root)).asleep_since is not None
        if asleep:  # closed for the manager (its list says asleep); the next use wakes it
            self._actor, self._closed, self._asleep = None, True, True
        return asleep

    async def _call(self, ref: Any) -> Any:
        """Await one actor call; the actor's own errors come back as they were raised, a
        lost actor as PadError (and this runtime closed)."""
        try:
            return await ref
        except Exception as exc:
            if await self._slept(exc):
                raise PadAsleepError(f"pad {self.name!r} fell asleep") from None
            raise await self._failure(exc, self._actor) from None

    async def _failure(self, exc: BaseException, actor: Any) -> BaseException:
        """The error to raise for a failed call: the actor's own, as it was raised; a lost
        actor a ClusterError (and this runtime closed: its next use starts it anew)."""
        lost = await self.backend.lost(exc, actor)
        if lost is None:
            return self.backend.unwrapped(exc, self.name)
        self._actor, self._closed = None, True
        return ClusterError(
            f"pad {self.name!r}: its node was lost ({lost}); use it again to start it on a "
            "live node"
        )


def scrubbed(value: Any) -> Any:
    """What an actor sent, scrubbed again here: the actor scrubs with what its process
    knows (the pad's own credentials, the patterns); this server knows every secret."""
    scrub = scrubber()
    if isinstance(value, Cell):
        scrub_cell(scrub, value)
    elif isinstance(value, OutputEvent):
        return OutputEvent(value.stream, scrub.scrub(value.text))
    elif isinstance(value, ProgressEvent):
        return ProgressEvent(scrub.scrub(value.message))
    elif isinstance(value, DisplayEvent):
        return DisplayEvent(scrub_bundle(value.data, scrub))
    elif isinstance(value, list):
        return [scrubbed(item) for item in value]
    return value
