"""ScratchpadManager: the named pads of one home directory and their lifecycles."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from scratchpad.config import Settings
from scratchpad.errors import PadNotFoundError
from scratchpad.runtime.base import RuntimeFactory, ScratchpadRuntime
from scratchpad.runtime.local import LocalRuntime
from scratchpad.runtime.names import validate_pad_name

NOTABLE_PACKAGES = (
    "numpy",
    "pandas",
    "polars",
    "scipy",
    "scikit-learn",
    "statsmodels",
    "matplotlib",
    "seaborn",
    "plotly",
    "pillow",
    "requests",
    "httpx",
    "beautifulsoup4",
    "lxml",
    "pyarrow",
    "duckdb",
    "sqlalchemy",
    "psycopg",
    "psycopg2",
    "pymysql",
    "openpyxl",
    "sympy",
    "networkx",
    "torch",
    "transformers",
    "pydantic",
    "pyyaml",
    "rich",
)


def pads_dir(settings: Settings) -> Path:
    return settings.home / "pads"


def local_factory(settings: Settings, cwd: Path) -> RuntimeFactory:
    """The default backend: a venv under ``<home>/pads/<name>`` and a kernel in ``cwd``."""

    def build(name: str) -> ScratchpadRuntime:
        root = pads_dir(settings) / validate_pad_name(name)
        return LocalRuntime(name, root=root, cwd=cwd, settings=settings)

    return build


def remote_factory(settings: Settings) -> RuntimeFactory:
    """Pads on the server named by SCRATCHPAD_REMOTE_URL."""
    from scratchpad.runtime.remote import RemoteRuntime

    url, key = settings.remote_url or "", settings.remote_api_key or ""

    def build(name: str) -> ScratchpadRuntime:
        return RemoteRuntime(name, url=url, api_key=key, compact_keep=settings.compact_keep_cells)

    return build


class ScratchpadManager:
    """Maps pad names to running runtimes; creates them on demand, once per name.

    With a ``workspace``, pads live under ``<workspace>/.scratchpad/`` and kernels run with
    the workspace as their working directory; without one, under the home directory
    (``SCRATCHPAD_HOME``) in the current directory.
    """

    def __init__(
        self,
        workspace: str | Path | None = None,
        *,
        settings: Settings | None = None,
        runtime_factory: RuntimeFactory | None = None,
    ) -> None:
        settings = settings or Settings.load()
        if workspace is not None:
            self.workspace: Path | None = Path(workspace).resolve()
            settings = settings.with_home(self.workspace / ".scratchpad")
            cwd = self.workspace
        else:
            self.workspace = None
            cwd = Path.cwd()
        self.settings = settings
        if runtime_factory is None:
            remote = settings.backend == "remote"
            runtime_factory = remote_factory(settings) if remote else local_factory(settings, cwd)
        self._factory = runtime_factory
        self._pads: dict[str, ScratchpadRuntime] = {}
        self._starting: dict[str, asyncio.Task[ScratchpadRuntime]] = {}
        self._stopping: dict[str, asyncio.Future[None]] = {}

    async def get_or_create(self, name: str) -> ScratchpadRuntime:
        """The running pad ``name``, started on first use (concurrent calls share one start)."""
        name = validate_pad_name(name)
        pad = self._pads.get(name)
        if pad is not None and not pad.closed:
            return pad
        task = self._starting.get(name)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._start(name))
            self._starting[name] = task
        return await asyncio.shield(task)

    async def _start(self, name: str) -> ScratchpadRuntime:
        try:
            stopping = self._stopping.get(name)
            if stopping is not None:  # the same pad is being closed or removed: let it finish
                await asyncio.wait([stopping])
            pad = self._factory(name)
            await pad.start()
            self._pads[name] = pad
            return pad
        finally:
            self._starting.pop(name, None)

    def get(self, name: str) -> ScratchpadRuntime:
        """A pad that is already running; PadNotFoundError otherwise."""
        pad = self._pads.get(validate_pad_name(name))
        if pad is None:
            raise PadNotFoundError(
                f"no running pad named {name!r}; use get_or_create({name!r}) to start it"
            )
        return pad

    def peek(self, name: str) -> ScratchpadRuntime:
        """A pad for reading its cells: the running one, or one loaded from disk unstarted."""
        name = validate_pad_name(name)
        pad = self._pads.get(name)
        if pad is not None and not pad.closed:
            return pad
        if name not in self.names_on_disk():
            raise PadNotFoundError(f"no pad named {name!r}; create it by running a cell in it")
        return self._factory(name)

    def names(self) -> list[str]:
        """Names of the running pads."""
        return sorted(self._pads)

    def names_on_disk(self) -> list[str]:
        """Names of every pad with an environment under the home, running or not."""
        root = pads_dir(self.settings)
        if not root.is_dir():
            return []
        return sorted(entry.name for entry in root.iterdir() if entry.is_dir())

    async def remove(self, name: str) -> None:
        """Stop the pad and delete its environment (running or only on disk)."""
        name = validate_pad_name(name)
        pad = self._pads.pop(name, None)
        if pad is None:
            if name not in self.names_on_disk():
                raise PadNotFoundError(f"no pad named {name!r}; there is nothing to remove")
            pad = self._factory(name)
        await self._stop(name, pad.cleanup())

    async def close(self, name: str) -> None:
        """Stop one pad's kernel; its environment stays for the next get_or_create."""
        pad = self._pads.pop(validate_pad_name(name), None)
        if pad is not None:
            await self._stop(name, pad.close())

    async def _stop(self, name: str, stopping: Coroutine[Any, Any, None]) -> None:
        """Run a close/cleanup that a concurrent get_or_create of the same name waits for."""
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
        await asyncio.gather(*(pad.detach() for pad in pads), return_exceptions=True)

    async def close_all(self) -> None:
        """Stop every kernel (environments are kept). Safe to call twice."""
        for task in list(self._starting.values()):  # pads still starting join the others
            with contextlib.suppress(Exception):
                await task
        pads = list(self._pads.values())
        self._pads.clear()
        await asyncio.gather(*(pad.close() for pad in pads), return_exceptions=True)

    async def cancel_all_running(self) -> None:
        await asyncio.gather(*(pad.cancel() for pad in self._pads.values() if pad.busy))

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
