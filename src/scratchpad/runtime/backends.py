"""Where a manager's pads run: one interface, one implementation per place.

``ScratchpadManager`` holds names, starts, sleep and the vault; everything that depends on
*where* pads run is asked of its :class:`PadBackend`: building a pad's runtime, whether a pad
exists, the pad list, forks, a pad's files, giving a running pad new vault variables.

- :class:`LocalBackend`: kernels on this machine, pad directories under the home.
- :class:`RemoteBackend`: pads of another Scratchpad server (``SCRATCHPAD_REMOTE_URL``).
- ``RayBackend`` (raybackend.py): kernels held by Ray actors on a cluster's nodes, pad
  directories in a store every node reaches.

The local and Ray backends share :class:`HomeBackend`: pad directories in one place this
process reads (listing, histories, files), whatever runs their kernels.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError, PadError, PadNotFoundError
from scratchpad.padnames import dir_in, dir_name, is_pad_dir_name
from scratchpad.runtime import venv, workdir
from scratchpad.runtime.base import RuntimeFactory, ScratchpadRuntime
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.padinfo import HISTORY, HistoryCounts, PadInfo, describe_running, modified
from scratchpad.runtime.placement import checked_resources
from scratchpad.runtime.watch import PadWatch

if TYPE_CHECKING:
    from scratchpad.runtime.remote_http import RemoteServer
    from scratchpad.vault.store import Vault

log = logging.getLogger(__name__)

Running = list[tuple[ScratchpadRuntime, PadWatch | None]]
Secrets = Callable[[str], dict[str, str]]


class PadBackend(ABC):
    """What a manager asks of the place its pads run."""

    #: pads' directories (history, checkpoint, accept log, workspace) are read here
    keeps_files: bool = True
    #: idle pads are put to sleep by the manager (their next use wakes them)
    sleeps: bool = True

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @abstractmethod
    def build(self, name: str) -> ScratchpadRuntime:
        """Pad ``name``'s runtime, not started."""

    def attach(
        self, pad: ScratchpadRuntime, watch: PadWatch, on_wake: Callable[[ScratchpadRuntime], None]
    ) -> None:
        """Let ``pad`` feed the manager's ``watch`` of its name (and say when it woke)."""
        return None

    def set_limits(self, pad: ScratchpadRuntime, limits: Mapping[str, object]) -> None:
        """``pad``'s own limits over its current ones (where this backend sets them)."""
        return None

    def place(self, pad: ScratchpadRuntime, resources: Mapping[str, object]) -> None:
        """Ask for ``resources`` (cpus, gpus, memory, custom) where ``pad`` is placed next."""
        self.check_placement(resources)

    def check_placement(self, resources: Mapping[str, object]) -> None:
        """InvalidInputError unless ``resources`` can place this backend's pads: only a
        cluster backend places pads (a malformed request is told as such first)."""
        checked_resources(resources)
        raise InvalidInputError(
            "resources (cpus, gpus, memory_mb, custom) place a pad on a Ray cluster and need "
            f"SCRATCHPAD_BACKEND=ray; these pads run with SCRATCHPAD_BACKEND="
            f"{self.settings.backend}: leave resources out, or use a server started with "
            "SCRATCHPAD_BACKEND=ray"
        )

    @abstractmethod
    def exists(self, name: str) -> bool:
        """Whether pad ``name`` exists where this process can see at once (no I/O elsewhere)."""

    async def has(self, name: str) -> bool:
        """Whether pad ``name`` exists (asking a pad server where there is one)."""
        return self.exists(name)

    def names_on_disk(self) -> list[str]:
        """Pads with a directory this process reads (none for a pad server's)."""
        return []

    @abstractmethod
    async def list_pads(self, running: Running, closed: set[str]) -> list[PadInfo]:
        """Every pad: ``running`` ones as they are, the others from where they are kept
        (``closed``: stopped here on purpose, not asleep)."""

    @abstractmethod
    async def pad_info(self, name: str, closed: set[str]) -> PadInfo:
        """Pad ``name`` that runs no runtime here; PadNotFoundError when there is none."""

    async def fork(self, source: str, target: str) -> PadInfo | None:
        """Fork ``source`` into ``target`` where only the backend can (a pad server); None
        when the manager forks through the pads' runtimes."""
        return None

    def workspace_of(self, name: str, pad: ScratchpadRuntime) -> Path:
        """The directory pad ``name``'s kernel runs in, for its files."""
        raise PadError(f"pad {name!r}: its files are not reachable through this backend")

    def history_path(self, name: str) -> Path:
        """Where pad ``name``'s history is kept here (a pad server's: never asked)."""
        raise PadError(f"pad {name!r}: its history is kept by its server, not here")

    def history_modified(self, name: str) -> float | None:
        """When pad ``name``'s history last changed (None where it is not kept here)."""
        return None

    async def update_secrets(
        self, pad: ScratchpadRuntime, env: Callable[[], dict[str, str]]
    ) -> bool:
        """Give running ``pad`` its vault variables (``env()``) now; whether anything
        changed (a backend whose pads get them from elsewhere: never)."""
        return False

    def describe_credentials(self, vault: Callable[[], Vault]) -> str:
        """What the model is told of the credentials pads get (names, never values)."""
        from scratchpad.vault.inject import describe_credentials

        return describe_credentials(vault())

    async def follow(self, pad: Callable[[], ScratchpadRuntime], cell_id: str) -> None:
        """Bring into the manager's journal of a pad (``pad()``: its runtime) a cell that
        another process runs, where the backend can (a Ray pad's actor replays its own);
        nothing here."""
        return None

    async def cancel_unheld(self, name: str, cell_id: str | None) -> bool | None:
        """Cancel a cell of pad ``name`` that this manager holds no runtime for; None when
        only the pad's own runtime could (the cancel is kept for its start)."""
        return None

    async def let_go(self, pad: ScratchpadRuntime, reason: str) -> None:
        """What becomes of a running pad when its manager stops (a server's shutdown): its
        kernel, which this process owns, is closed saying ``reason``."""
        await pad.close(reason=reason)

    async def close(self) -> None:
        """Let go of what the backend holds (connections); pads are closed by the manager."""
        return None


@runtime_checkable
class HomePad(Protocol):
    """What the runtimes of a home backend have: a watch they feed, a hook for waking, a
    directory under the home and a working directory (local and Ray pads)."""

    watch: PadWatch
    on_wake: Callable[[ScratchpadRuntime], None] | None
    root: Path

    def ensure_cwd(self) -> Path: ...


class HomeBackend(PadBackend):
    """Pads whose directories live under ``home/pads`` (the settings' home, or a store every
    node reaches), read here whatever runs their kernels."""

    def __init__(self, settings: Settings, home: Path) -> None:
        super().__init__(settings)
        self.home = home
        self._counts = HistoryCounts()
        self._warned: set[str] = set()  # stray entries of pads/ already logged

    @property
    def pads_dir(self) -> Path:
        return self.home / "pads"

    def root(self, name: str) -> Path:
        """The directory of pad ``name`` (see names.dir_name: never outside ``pads/``)."""
        return dir_in(self.pads_dir, name)

    def attach(
        self, pad: ScratchpadRuntime, watch: PadWatch, on_wake: Callable[[ScratchpadRuntime], None]
    ) -> None:
        if isinstance(pad, HomePad):
            pad.watch = watch
            pad.on_wake = on_wake

    def exists(self, name: str) -> bool:
        root = self.root(name)
        return root.is_dir() and not root.is_symlink()

    def names_on_disk(self) -> list[str]:
        """Entries of ``pads/`` that are no pad's directory (strays, symlinks) are skipped
        with a warning."""
        root = self.pads_dir
        if not root.is_dir():
            return []
        names = []
        for entry in root.iterdir():
            if entry.name.startswith("."):
                continue  # a venv being built or replaced (venv.create)
            name = self._pad_name(entry)
            if name is not None:
                names.append(name)
        return sorted(names)

    def _pad_name(self, entry: Path) -> str | None:
        """The name of the pad living in ``entry``, or None (warned once) if none does."""
        problem = None
        name = None
        if entry.is_symlink():
            problem = "is a symbolic link"
        elif not entry.is_dir():
            problem = "is not a directory"
        elif not is_pad_dir_name(entry.name):
            problem = "is not a pad directory name"
        else:
            name = venv.read_name(entry) or entry.name
            if dir_name(name) != entry.name:
                problem, name = "does not hold the pad its name says", None
        if problem is not None and entry.name not in self._warned:
            self._warned.add(entry.name)
            log.warning("skipping %s under %s: it %s", entry.name, entry.parent, problem)
        return name

    async def list_pads(self, running: Running, closed: set[str]) -> list[PadInfo]:
        """Histories of pads without a runtime are read in a thread, and counted again only
        when their file changed."""
        names = await asyncio.to_thread(self.names_on_disk)
        stopped = sorted(set(names) - {pad.name for pad, _ in running})
        listed = await asyncio.to_thread(lambda: [self._at_rest(n, closed) for n in stopped])
        listed += await describe_running(running)
        return sorted(listed, key=lambda info: info.name)

    async def pad_info(self, name: str, closed: set[str]) -> PadInfo:
        if not self.exists(name):
            raise PadNotFoundError(f"no pad named {name!r}; create it by running a cell in it")
        return await asyncio.to_thread(self._at_rest, name, closed)

    def _at_rest(self, name: str, closed: set[str]) -> PadInfo:
        """A pad on disk without a kernel here (blocking I/O)."""
        return self._counts.stopped(name, self.root(name), closed=name in closed)

    def history_path(self, name: str) -> Path:
        return self.root(name) / HISTORY

    def history_modified(self, name: str) -> float | None:
        return modified(self.history_path(name)) or modified(self.root(name))

    def workspace_of(self, name: str, pad: ScratchpadRuntime) -> Path:
        if isinstance(pad, HomePad):
            return pad.ensure_cwd()
        raise PadError(f"pad {name!r} is not a pad of this home; its files are not reachable here")


class LocalBackend(HomeBackend):
    """Kernels on this machine: a venv under ``<home>/pads/<dir>`` and a kernel in ``cwd``,
    shared by every pad; without one, each pad in its own ``<home>/workspaces/<dir>``
    (workdir.py). ``secrets(name)`` gives a pad's vault variables at each kernel start;
    ``guarded`` directories stay out of the kernels' reach like the home."""

    def __init__(
        self,
        settings: Settings,
        cwd: Path | None = None,
        secrets: Secrets | None = None,
        guarded: tuple[Path, ...] = (),
    ) -> None:
        super().__init__(settings, settings.home)
        self.cwd = cwd
        self.secrets = secrets
        self.guarded = guarded

    def build(self, name: str) -> ScratchpadRuntime:
        secrets = self.secrets
        secret_env = (lambda: secrets(name)) if secrets is not None else None
        where = self.cwd if self.cwd is not None else workdir.pad_workdir(self.home, name)
        return LocalRuntime(
            name, root=self.root(name), cwd=where, own_cwd=self.cwd is None,
            settings=self.settings, secret_env=secret_env, guarded=self.guarded,
        )  # fmt: skip

    def set_limits(self, pad: ScratchpadRuntime, limits: Mapping[str, object]) -> None:
        if isinstance(pad, LocalRuntime):
            pad.set_limits(pad.limits.changed(limits))

    async def update_secrets(
        self, pad: ScratchpadRuntime, env: Callable[[], dict[str, str]]
    ) -> bool:
        return isinstance(pad, LocalRuntime) and bool(await pad.update_secrets(env()))


class RemoteBackend(PadBackend):
    """Pads on the server named by SCRATCHPAD_REMOTE_URL: it keeps them, lists them, runs
    and confines them, and gives them its vault's credentials."""

    keeps_files = False
    sleeps = False  # its server puts them to sleep

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.url = settings.remote_url or ""
        self.api_key = settings.remote_api_key or ""

    def build(self, name: str) -> ScratchpadRuntime:
        from scratchpad.runtime.remote import RemoteRuntime

        return RemoteRuntime(
            name, url=self.url, api_key=self.api_key,
            compact_keep=self.settings.compact_keep_cells, reconnect_s=self.settings.reconnect_s,
        )  # fmt: skip

    @property
    def server(self) -> RemoteServer:
        from scratchpad.runtime.remote_http import RemoteServer

        return RemoteServer(self.url, self.api_key)

    def place(self, pad: ScratchpadRuntime, resources: Mapping[str, object]) -> None:
        """Kept on ``pad`` and sent with its next start: its server places it (a Ray-backed
        one does; another refuses, and says so)."""
        from scratchpad.runtime.remote import RemoteRuntime

        self.check_placement(resources)
        if isinstance(pad, RemoteRuntime):
            pad.resources = dict(resources)

    def check_placement(self, resources: Mapping[str, object]) -> None:
        checked_resources(resources)

    def exists(self, name: str) -> bool:
        return False  # nothing of its pads is here: ask with has()

    async def has(self, name: str) -> bool:
        return await self.server.has(name)

    async def list_pads(self, running: Running, closed: set[str]) -> list[PadInfo]:
        return await self.server.pads()

    async def pad_info(self, name: str, closed: set[str]) -> PadInfo:
        return await self.server.pad_info(name)

    async def fork(self, source: str, target: str) -> PadInfo | None:
        return await self.server.fork(source, target)

    def workspace_of(self, name: str, pad: ScratchpadRuntime) -> Path:
        raise PadError(
            f"pad {name!r} runs on {self.url}: its files are reachable there "
            "(GET /v1/pads/{name}/files), not through this remote backend"
        )

    def describe_credentials(self, vault: Callable[[], Vault]) -> str:
        from scratchpad.runtime.remote_http import credentials_description

        return credentials_description(self.url, self.api_key)

    async def follow(self, pad: Callable[[], ScratchpadRuntime], cell_id: str) -> None:
        """Bring into the manager's journal of a pad (``pad()``: its runtime) a cell that
        another process runs, where the backend can (a Ray pad's actor replays its own);
        nothing here."""
        return None

    async def cancel_unheld(self, name: str, cell_id: str | None) -> bool | None:
        transient = self.build(name)  # a pad of the server this manager does not hold
        try:
            return await transient.cancel(cell_id)
        finally:
            await transient.detach()


class FactoryBackend(LocalBackend):
    """A local backend whose runtimes come from ``factory`` (tests, probes)."""

    def __init__(self, settings: Settings, factory: RuntimeFactory) -> None:
        super().__init__(settings)
        self.factory = factory

    def build(self, name: str) -> ScratchpadRuntime:
        return self.factory(name)
