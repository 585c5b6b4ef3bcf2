"""ScratchpadManager: the named pads of one home directory and their lifecycles."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
import time
import weakref
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError, InvalidPadNameError, PadNotFoundError
from scratchpad.padnames import dir_in, validate_pad_name
from scratchpad.runtime.backends import (
    FactoryBackend,
    LocalBackend,
    PadBackend,
    RemoteBackend,
    Secrets,
)
from scratchpad.runtime.base import CLOSED, RuntimeFactory, ScratchpadRuntime
from scratchpad.runtime.cellqueue import remember
from scratchpad.runtime.limits import PadLimits
from scratchpad.runtime.padinfo import PadInfo, describe_running
from scratchpad.runtime.rescrub import RescrubReport, rescrub_home
from scratchpad.runtime.watch import PadWatch, PadWatches
from scratchpad.scrub import scrubber
from scratchpad.vault.sources import register_process_secrets

if TYPE_CHECKING:
    from scratchpad.vault.store import Vault

log = logging.getLogger(__name__)
EARLY_CANCELS_KEPT = 256  # per pad
SLEEP_CHECK_MAX_S = 60.0  # the sleeper looks at the pads at least this often

NOTABLE_PACKAGES = (
    "numpy", "pandas", "polars", "scipy", "scikit-learn", "statsmodels", "matplotlib",
    "seaborn", "plotly", "pillow", "requests", "httpx", "beautifulsoup4", "lxml", "pyarrow",
    "duckdb", "sqlalchemy", "psycopg", "psycopg2", "pymysql", "openpyxl", "sympy", "networkx",
    "torch", "transformers", "pydantic", "pyyaml", "rich",
)  # fmt: skip


def pads_dir(settings: Settings) -> Path:
    return settings.home / "pads"


def pad_root(settings: Settings, name: str) -> Path:
    """The directory of pad ``name`` (see names.dir_name: never outside ``pads/``)."""
    return dir_in(pads_dir(settings), name)


def bound_settings(settings: Settings, workspace: Path) -> Settings:
    """``settings`` for a bound ``workspace``: its home is ``<workspace>/.scratchpad``."""
    return settings.with_home(workspace / ".scratchpad")


def backend_for(
    settings: Settings,
    workspace: Path | None,
    secrets: Secrets,
    guarded: tuple[Path, ...] = (),
) -> PadBackend:
    """The backend SCRATCHPAD_BACKEND names (``local``, ``remote``, ``ray``)."""
    if settings.backend == "remote":
        return RemoteBackend(settings)
    if settings.backend == "ray":
        from scratchpad.runtime.raybackend import RayBackend  # Ray only for Ray's pads

        return RayBackend(settings, workspace, secrets)
    return LocalBackend(settings, workspace, secrets, guarded)


def refuse_secret_name(name: str) -> None:
    """A new pad's name is shown unscrubbed (its directory, listings, the audit log): one
    that holds a secret value is refused, the message showing it as its label."""
    shown = scrubber().scrub(name)
    if shown != name:
        raise InvalidPadNameError(
            f"invalid pad name {shown!r}: it holds a secret value (shown as its label); "
            "pick a name without it"
        )


class ScratchpadManager:
    """Maps pad names to running runtimes; creates them on demand, once per name.

    With a ``workspace``, pads live under ``<workspace>/.scratchpad/`` and kernels run with
    the workspace as their working directory; without one, under the home directory
    (``SCRATCHPAD_HOME``), each pad in a directory of its own (``<home>/workspaces/<dir>``):
    the current directory is never a pad's by accident.

    ``vault`` (default: the home's, opened on first use) gives local pads their credentials;
    a change to it reaches running pads without a restart (see :meth:`refresh_secrets`).
    """

    def __init__(
        self,
        workspace: str | Path | None = None,
        *,
        settings: Settings | None = None,
        runtime_factory: RuntimeFactory | None = None,
        backend: PadBackend | None = None,
        vault: Vault | None = None,
    ) -> None:
        settings = settings or Settings.load()
        self.workspace = None if workspace is None else Path(workspace).resolve()
        if self.workspace is not None:
            settings = bound_settings(settings, self.workspace)
        self.settings = settings
        register_process_secrets(settings)
        if backend is None and runtime_factory is not None:
            backend = FactoryBackend(settings, runtime_factory)
        self.backend = backend or backend_for(settings, self.workspace, self.pad_secret_env)
        self._vault = vault
        if vault is not None:
            vault.subscribe(self._vault_changed)
        self._loop: asyncio.AbstractEventLoop | None = None  # where pads run (for rotations)
        self._rotations: set[asyncio.Task[None]] = set()  # vault changes being applied
        self._rescrubbing = asyncio.Lock()
        self._scrubbed_version = scrubber().version
        self._pads: dict[str, ScratchpadRuntime] = {}
        self._starting: dict[str, asyncio.Task[ScratchpadRuntime]] = {}
        self._stopping: dict[str, asyncio.Future[None]] = {}
        self._early_cancels: dict[str, dict[str, None]] = {}  # pad → ids cancelled before it ran
        self.accepting: dict[tuple[str, str], str] = {}  # (pad, cell id) being accepted: hash
        self.watches = PadWatches()  # the pads' live feeds, by name
        # Pads that fell asleep and that someone still holds: the one runtime of their name
        # (used again, it wakes and is this manager's again; see _woke).
        self._asleep: weakref.WeakValueDictionary[str, ScratchpadRuntime] = (
            weakref.WeakValueDictionary()
        )
        self._handed: dict[str, float] = {}  # when get_or_create last gave out each pad
        self._closed: set[str] = set()  # pads closed on purpose here: stopped, not asleep
        self._sleeper: asyncio.Task[None] | None = None

    async def get_or_create(
        self,
        name: str,
        *,
        limits: Mapping[str, object] | None = None,
        resources: Mapping[str, object] | None = None,
    ) -> ScratchpadRuntime:
        """The running pad ``name``, started on first use (concurrent calls share one start).
        ``limits``: the pad's own (``memory_mb``, ``processes``, ``cpu_weight``, ``disk_mb``;
        see limits.py) over the server's defaults, kept while this manager runs: the memory
        and disk limits hold at once, the others from its next kernel on. ``resources``:
        what the pad asks its cluster for (``cpus``, ``gpus``, ``memory_mb``, ``custom``;
        a Ray backend's, see raybackend.py), for its placement from its next start on.
        InvalidInputError for a bad one, before anything starts."""
        name = validate_pad_name(name)
        if limits is not None:
            PadLimits.from_settings(self.settings).changed(limits)  # checked before any start
        self._handed[name] = time.time()  # a pad just given out does not fall asleep
        pad = self._pads.get(name)
        if resources is not None:
            self.backend.check_placement(resources)  # checked before any start
            if (held := pad or self._asleep.get(name)) is not None:
                self.backend.place(held, resources)  # its next placement (a running one keeps
                # where it runs until it is closed, falls asleep or loses its node)
        if pad is not None and not pad.closed:
            self._set_limits(pad, limits)
            return pad
        task = self._starting.get(name)
        if task is None:
            refuse_secret_name(name)
            task = asyncio.get_running_loop().create_task(self._start(name, limits, resources))
            self._starting[name] = task
        pad = await asyncio.shield(task)
        self._set_limits(pad, limits)
        return pad

    def _set_limits(self, pad: ScratchpadRuntime, limits: Mapping[str, object] | None) -> None:
        if limits:
            self.backend.set_limits(pad, limits)

    async def _start(
        self,
        name: str,
        limits: Mapping[str, object] | None = None,
        resources: Mapping[str, object] | None = None,
    ) -> ScratchpadRuntime:
        try:
            stopping = self._stopping.get(name)
            if stopping is not None:  # the same pad is being closed or removed: let it finish
                await asyncio.wait([stopping])
            self._loop = asyncio.get_running_loop()
            self._start_sleeper()
            pad = self._asleep.pop(name, None) or self._build(name)
            self._set_limits(pad, limits)
            if resources is not None:
                self.backend.place(pad, resources)
            await pad.start()
            for cell_id in self._early_cancels.pop(name, {}):
                await pad.cancel(cell_id)  # still on their way: they must not run
            self._pads[name] = pad
            self._closed.discard(name)
            return pad
        finally:
            self._starting.pop(name, None)

    def _build(self, name: str) -> ScratchpadRuntime:
        """A runtime for ``name`` from the backend, feeding the name's watch."""
        pad = self.backend.build(name)
        self.backend.attach(pad, self.watches.get(name), self._woke)
        return pad

    def _woke(self, pad: ScratchpadRuntime) -> None:
        """A pad this manager let go of when it fell asleep started a kernel again (its
        holder used it): it is this manager's running pad again."""
        if self._asleep.get(pad.name) is pad:
            del self._asleep[pad.name]
        if pad.name not in self._starting:  # else the start registers it, once it is ready
            self._pads.setdefault(pad.name, pad)

    # -- sleep ------------------------------------------------------------------------------
    def _start_sleeper(self) -> None:
        """Start the task that puts idle pads to sleep (SCRATCHPAD_SLEEP_AFTER_S; 0: none)."""
        after = self.settings.sleep_after_s
        if after <= 0 or not self.backend.sleeps:
            return
        if self._sleeper is None or self._sleeper.done():
            self._sleeper = asyncio.get_running_loop().create_task(self._sleep_idle_pads(after))

    async def _sleep_idle_pads(self, after: float) -> None:
        every = min(SLEEP_CHECK_MAX_S, after / 4)
        while True:
            await asyncio.sleep(every)
            await self.sleep_idle(time.time())

    async def sleep_idle(self, now: float) -> list[str]:
        """Put to sleep every running pad idle for SCRATCHPAD_SLEEP_AFTER_S at ``now`` (see
        ScratchpadRuntime.sleep_if_idle; a pad given out by get_or_create that long ago at
        most stays awake): an asleep pad holds no process, and no runtime here (its next
        get_or_create starts it again). The names of those that fell asleep."""
        after = self.settings.sleep_after_s
        slept = []
        for name, pad in list(self._pads.items()):
            if self._pads.get(name) is not pad or now - self._handed.get(name, 0.0) < after:
                continue
            try:
                if not await pad.sleep_if_idle(now):
                    continue
            except Exception:  # one pad's trouble must not keep the others awake
                log.exception("putting pad %r to sleep failed", name)
                continue
            if self._pads.get(name) is pad:  # not closed or removed meanwhile
                del self._pads[name]
                self._asleep[name] = pad
            slept.append(name)
        return slept

    def watch(self, name: str) -> PadWatch:
        """The live feed of pad ``name`` (it may not exist yet): subscribe to it."""
        return self.watches.get(validate_pad_name(name))

    def get(self, name: str) -> ScratchpadRuntime:
        """A pad that is already running; PadNotFoundError otherwise."""
        pad = self._pads.get(validate_pad_name(name))
        if pad is None:
            raise PadNotFoundError(
                f"no running pad named {name!r}; use get_or_create({name!r}) to start it"
            )
        return pad

    def peek(self, name: str) -> ScratchpadRuntime:
        """A pad for reading its cells: the running one, or one loaded from disk unstarted
        (``await pad.load_cells()`` reads its history off the event loop)."""
        name = validate_pad_name(name)
        pad = self._pads.get(name)
        if pad is not None and not pad.closed:
            return pad
        if not self.exists(name):
            raise PadNotFoundError(f"no pad named {name!r}; create it by running a cell in it")
        return self._build(name)

    async def follow(self, name: str, cell_id: str) -> None:
        """Bring a cell of pad ``name`` that another process runs into this manager's watch
        (its journal), where the backend can (a Ray pad's actor); nothing otherwise."""
        if self.watch(name).journals.get(cell_id) is None:
            with contextlib.suppress(PadNotFoundError):
                await self.backend.follow(lambda: self.peek(name), cell_id)

    def exists(self, name: str) -> bool:
        """Whether pad ``name`` runs or has an environment under the home."""
        name = validate_pad_name(name)
        return name in self._pads or name in self._starting or self.backend.exists(name)

    def workspace_of(self, name: str) -> Path:
        """The directory pad ``name``'s kernel runs in (its files' root), for a pad that runs
        or exists on disk (a pad's own directory is made if missing: it blocks on the disk);
        a backend that keeps no files here says where they are (PadError)."""
        if not self.backend.keeps_files:
            return self.backend.workspace_of(name, self.backend.build(name))
        return self.backend.workspace_of(name, self.peek(name))

    def names(self) -> list[str]:
        """Names of the running pads."""
        return sorted(self._pads)

    def names_on_disk(self) -> list[str]:
        """Names of every pad with a directory this process reads, running or not."""
        return self.backend.names_on_disk()

    async def has_pad(self, name: str) -> bool:
        """Whether pad ``name`` exists where pads live: this home, or the pad server of a
        manager of remote pads (pads other clients made count)."""
        name = validate_pad_name(name)
        return self.exists(name) or await self.backend.has(name)

    async def list_pads(self) -> list[PadInfo]:
        """Every pad, running or on disk: its status, cells, memory and last use (see
        padinfo.PadInfo). Histories of stopped pads are read in a thread, and counted again
        only when their file changed. A manager of remote pads lists the server's."""
        running = [(pad, self._watched(pad)) for pad in self._pads.values() if not pad.closed]
        return await self.backend.list_pads(running, self._closed)

    async def pad_info(self, name: str) -> PadInfo:
        """One pad's line of :meth:`list_pads`; PadNotFoundError when there is no such pad."""
        name = validate_pad_name(name)
        pad = self._pads.get(name)
        if pad is not None and not pad.closed:
            return (await describe_running([(pad, self._watched(pad))]))[0]
        return await self.backend.pad_info(name, self._closed)

    def history_modified(self, name: str) -> float | None:
        """When pad ``name``'s history last changed (blocking; None where it is kept
        elsewhere)."""
        return self.backend.history_modified(validate_pad_name(name))

    def _watched(self, pad: ScratchpadRuntime) -> PadWatch | None:
        watch = getattr(pad, "watch", None)
        return watch if isinstance(watch, PadWatch) else None

    async def cancel(self, name: str, cell_id: str | None = None) -> bool:
        """Cancel cell ``cell_id`` of pad ``name`` (without an id: its running cell); see
        ScratchpadRuntime.cancel. A cell named by id that has not reached its pad yet (the pad
        still starting, or the request on its way) never runs. False when nothing was there
        to cancel."""
        name = validate_pad_name(name)
        starting = self._starting.get(name)
        if starting is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(starting)
        pad = self._pads.get(name)
        if pad is not None and not pad.closed:
            return await pad.cancel(cell_id)
        cancelled = await self.backend.cancel_unheld(name, cell_id)
        if cancelled is not None:
            return cancelled
        if cell_id is not None:
            remember(self._early_cancels.setdefault(name, {}), cell_id, EARLY_CANCELS_KEPT)
        return False

    async def remove(self, name: str) -> None:
        """Stop the pad and delete its environment (running or only on disk)."""
        name = validate_pad_name(name)
        pad = self._pads.pop(name, None) or self._asleep.pop(name, None)
        self._handed.pop(name, None)
        self._closed.discard(name)
        if pad is None:
            if not await self.has_pad(name):
                raise PadNotFoundError(f"no pad named {name!r}; there is nothing to remove")
            pad = self._build(name)
        await self._stop(name, pad.cleanup())

    async def revert(self, name: str) -> int:
        """Put pad ``name``'s namespace back as it was before its last cell that changed it
        (see ScratchpadRuntime.revert); the pad is started (woken) for it. The number of the
        cell whose variables are current now."""
        name = validate_pad_name(name)
        if not await self.has_pad(name):
            raise PadNotFoundError(f"no pad named {name!r}; there is nothing to revert")
        return await (await self.get_or_create(name)).revert()

    async def fork(self, source: str, target: str) -> PadInfo:
        """Make pad ``target`` a copy of pad ``source``: its packages (the venv built from
        its requirements), its variables (its checkpoint, taken afresh when its kernel runs:
        in its turn, never during a cell) and its cells (ids and numbers go on). ``source``
        is left as it was; ``target`` starts asleep (its first cell restores the variables).
        The vault's grants are not copied: a fork is a new pad for the vault. Refuses a
        ``target`` that exists. ``target``'s line of :meth:`list_pads`."""
        source, target = validate_pad_name(source), validate_pad_name(target)
        if source == target:
            raise InvalidInputError(f"cannot fork pad {source!r} into itself; name a new pad")
        refuse_secret_name(target)
        forked = await self.backend.fork(source, target)
        if forked is not None:
            return forked
        if not self.exists(source):
            raise PadNotFoundError(f"no pad named {source!r}; there is nothing to fork")
        if self.exists(target) or target in self._stopping:
            raise InvalidInputError(
                f"pad {target!r} exists already; pick another name for the fork, or remove it"
            )
        starting = self._starting.get(source)
        if starting is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(starting)
        pad = self._pads.get(source) or self._asleep.get(source) or self._build(source)
        await self._stop(target, pad.fork_into(self._build(target)))  # target's users wait
        return await self.pad_info(target)

    async def close(self, name: str, *, reason: str = CLOSED) -> None:
        """Stop one pad's kernel; its environment stays for the next get_or_create."""
        pad = self._pads.pop(validate_pad_name(name), None)
        if pad is not None:
            self._closed.add(pad.name)
            await self._stop(name, pad.close(reason=reason))

    async def _stop(self, name: str, stopping: Coroutine[Any, Any, None]) -> None:
        """Run a close/cleanup (or a fork into ``name``) that a concurrent get_or_create of
        the same name waits for."""
        task = asyncio.ensure_future(stopping)
        self._stopping[name] = task
        try:
            await asyncio.shield(task)
        finally:
            if self._stopping.get(name) is task:
                del self._stopping[name]

    async def detach_all(self) -> None:
        """Let go of every pad; remote pads keep running on their server (see detach)."""
        pads = list(self._pads.values())
        self._pads.clear()
        results = await asyncio.gather(*(pad.detach() for pad in pads), return_exceptions=True)
        _log_failures("detaching", pads, results)

    async def close_all(self, *, reason: str = CLOSED) -> None:
        """Stop every kernel this process owns (environments are kept); running cells end
        saying ``reason``; a Ray pad's actor stays, for the next server (it sleeps by itself
        when idle). Safe to call twice."""
        sleeper, self._sleeper = self._sleeper, None
        if sleeper is not None:
            sleeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sleeper
        for task in list(self._starting.values()):  # pads still starting join the others
            with contextlib.suppress(Exception):
                await task
        pads = [*self._pads.values(), *self._asleep.values()]  # held asleep: closed too
        self._pads.clear()
        self._asleep.clear()
        closing = (self.backend.let_go(pad, reason) for pad in pads)
        results = await asyncio.gather(*closing, return_exceptions=True)
        _log_failures("closing", pads, results)
        self.watches.close_all()  # their last status said so; the feeds end

    async def rescrub(self) -> RescrubReport:
        """Scrub everything the home stores again with the process's scrubber; call it when a
        secret was added or rotated. Running pads scrub their cells in memory and rewrite
        their histories under the history's own lock; stopped pads' histories, the
        observation store and the session files are rewritten on a worker thread, and a
        stopped pad waits to start until that is done."""
        names = await asyncio.to_thread(self.names_on_disk)
        while self._stopping:  # a pad still closing writes its last cells first
            await asyncio.wait(list(self._stopping.values()))
        pads = [pad for pad in self._pads.values() if not pad.closed]
        pads += self._asleep.values()  # held by someone: their cells in memory too
        starting = list(self._starting.values())
        held = [name for name in names if name not in self._pads and name not in self._starting]
        held = [name for name in held if name not in self._asleep]
        guard = asyncio.get_running_loop().create_future()
        for name in held:
            self._stopping[name] = guard  # _start waits for it
        paths = {self.backend.history_path(name) for name in held}
        try:
            running = await self._rescrub_running(pads, starting)
            report = await asyncio.to_thread(
                rescrub_home, self.settings, histories=paths, scrub=scrubber()
            )
        finally:
            guard.set_result(None)
            for name in held:
                if self._stopping.get(name) is guard:
                    del self._stopping[name]
        for name, outcome in running:
            if isinstance(outcome, OSError):
                log.warning("could not scrub the history of pad %r again: %s", name, outcome)
                report.failed.append(name)
            else:
                report.cells_changed += outcome[0]
                report.count(outcome[1])
        return report

    async def _rescrub_running(
        self, pads: list[ScratchpadRuntime], starting: list[asyncio.Task[ScratchpadRuntime]]
    ) -> list[tuple[str, tuple[int, bool] | OSError]]:
        for task in starting:
            with contextlib.suppress(Exception):
                pads.append(await asyncio.shield(task))
        outcomes: list[tuple[str, tuple[int, bool] | OSError]] = []
        for pad in pads:
            try:
                outcomes.append((pad.name, await pad.rescrub()))
            except OSError as exc:  # one pad's disk trouble must not stop the others
                outcomes.append((pad.name, exc))
        return outcomes

    async def cancel_all_running(self) -> None:
        await asyncio.gather(*(pad.cancel() for pad in self._pads.values() if pad.busy))

    # -- the vault --------------------------------------------------------------------------
    @property
    def vault(self) -> Vault:
        """The vault whose connections local pads get (the home's unless one was given)."""
        if self._vault is None:
            from scratchpad.vault.store import Vault

            self._vault = Vault(self.settings)
            self._vault.subscribe(self._vault_changed)
        return self._vault

    def pad_secret_env(self, name: str) -> dict[str, str]:
        """Pad ``name``'s vault variables for a kernel starting now (audited as inject)."""
        from scratchpad.vault.inject import pad_env

        return pad_env(self.vault, name)

    def describe_credentials(self) -> str:
        """What the model is told of the credentials pads get: names, never values."""
        if self._vault is not None:
            from scratchpad.vault.inject import describe_credentials

            return describe_credentials(self._vault)
        return self.backend.describe_credentials(lambda: self.vault)

    def _vault_changed(self, event: str, engine: str, name: str) -> None:
        """A vault listener (any thread): bring running pads up to date in the background,
        and when the scrubber learnt a new secret, scrub what the home already stores."""
        loop = self._loop
        if loop is None:
            with contextlib.suppress(RuntimeError):
                loop = self._loop = asyncio.get_running_loop()
        if loop is None or loop.is_closed():
            return

        def schedule() -> None:
            if self._pads:
                self._track(loop.create_task(self.refresh_secrets((engine, name))))
            if scrubber().version != self._scrubbed_version:
                self._scrubbed_version = scrubber().version
                self._track(loop.create_task(self._rescrub_in_background()))

        try:
            in_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            in_loop = False
        if in_loop:
            schedule()
        else:
            loop.call_soon_threadsafe(schedule)

    def _track(self, task: asyncio.Task[None]) -> None:
        self._rotations.add(task)
        task.add_done_callback(self._rotations.discard)

    async def _rescrub_in_background(self) -> None:
        """A re-scrub nobody awaits: what went wrong is logged here, never left to the
        loop as an exception no one retrieved."""
        try:
            async with self._rescrubbing:  # one at a time; a later one sees every secret
                report = await self.rescrub()
        except Exception:
            log.exception("scrubbing stored text again failed")
            return
        if report.failed:
            log.warning("scrubbing stored text again failed for: %s", ", ".join(report.failed))

    async def refresh_secrets(self, changed: tuple[str, str] | None = None) -> None:
        """Give every running pad its current vault variables without a restart (a pad
        running a cell gets them when the cell ends; a remote pad's server gives them);
        ``changed`` is audited as rotate."""
        from scratchpad.vault.inject import pad_env

        pads = list(self._pads.items())

        async def refresh(name: str, pad: ScratchpadRuntime) -> None:
            changes = await self.backend.update_secrets(
                pad, lambda: pad_env(self.vault, name, audit=None)
            )
            if changes and changed is not None:
                self.vault.audit.append("rotate", *changed, pad=name)

        results = await asyncio.gather(*(refresh(n, p) for n, p in pads), return_exceptions=True)
        _log_failures("updating the credentials of", [p for _, p in pads], results)

    async def rotations_done(self) -> None:
        """Wait for the pad updates that vault changes started."""
        while self._rotations:
            await asyncio.gather(*list(self._rotations), return_exceptions=True)

    @staticmethod
    def probe_packages() -> list[str]:
        """Notable packages importable from pads (the host's), as ``name==version``."""
        found = []
        for name in NOTABLE_PACKAGES:
            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                found.append(f"{name}=={importlib.metadata.version(name)}")
        return found

    async def __aenter__(self) -> ScratchpadManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close_all()


def _log_failures(doing: str, pads: list[ScratchpadRuntime], results: list[Any]) -> None:
    """Say which pads failed to stop, and why (nothing may be dropped silently)."""
    for pad, result in zip(pads, results, strict=True):
        if isinstance(result, BaseException):
            log.warning("%s pad %r failed: %r", doing, pad.name, result)
