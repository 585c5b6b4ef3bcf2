"""How one pad's processes start: the kernel and the installer, each from the trusted base
interpreter through the pad's launcher (``inkernel/confine.py``, see ``confinement``), with
the pad's environment (the allowlist, its model settings, its vault variables) in its own
temp directory. Nothing of the pad (its venv's ``bin/``, its ``.pth`` files) runs before the
launcher has confined the process. :func:`run_confined` starts a program the same way
without a pad of its own (the shell tool): in a workspace, with a temp directory per run.

``LocalRuntime`` decides when a kernel starts; this module decides what it starts with.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from scratchpad.config import Settings
from scratchpad.errors import SandboxError
from scratchpad.fsutil import private_dir
from scratchpad.runtime import checkpoint, confinement, procgroup, sandboxing, venv
from scratchpad.runtime.kernel import KernelProcess
from scratchpad.runtime.limits import WATCHDOG, PadLimits, Watched
from scratchpad.runtime.proctree import new_tag, running

log = logging.getLogger(__name__)
SecretEnv = Callable[[], dict[str, str]]  # the pad's vault variables, asked at each kernel start
SERVER_PATHS = sandboxing.server_paths()
PROGRAMS_DIR = "programs"  # <home>/programs/<run>/tmp: the temp directory of one confined run


class Launcher:
    """Starts pad ``name``'s kernel and installer; remembers what its kernel was given."""

    def __init__(
        self,
        name: str,
        *,
        root: Path,
        cwd: Path,
        settings: Settings,
        worker: Path,
        secret_env: SecretEnv | None = None,
        guarded: tuple[Path, ...] = (),
        limits: Callable[[], PadLimits] | None = None,
    ) -> None:
        self.name = name
        self.guarded = guarded  # kept out of reach like the home (see sandboxing.pad_rules)
        self.root = root
        self.cwd = cwd
        self.settings = settings
        self.worker = worker
        self.llm_env: dict[str, str] = {}  # the pad's own model settings (configure_llm)
        self.secrets_given: dict[str, str] = {}  # what the running kernel got of the vault
        self._secret_source = secret_env
        self._tmp = root / sandboxing.TMP_DIR  # the kernel's temp and cache directory
        default = PadLimits.from_settings(settings)
        self._limits = limits or (lambda: default)  # the pad's, asked at each start

    async def spawn(self, generation: int = 0) -> KernelProcess:
        """One kernel, confined as this system allows (see ``confinement``); when its launcher
        refuses a mechanism, the next start does without it (unless the setting requires it).
        ``generation``: the kernel's (its checkpoints record it)."""
        self._tmp = await asyncio.to_thread(sandboxing.fresh_tmp, self.root)
        ckpt = checkpoint.kernel_config(self.settings, self.root, self.cwd)
        if ckpt is not None:
            ckpt["generation"] = generation
            await asyncio.to_thread(checkpoint.prepare, self.root)
        while True:
            spec = await asyncio.to_thread(self.spec)
            paths = self.paths()
            env = self.kernel_env()
            if ckpt is not None:
                ckpt["secret_env"] = checkpoint.secret_names(env)
            try:
                kernel = await KernelProcess.spawn(
                    sandboxing.BASE_PYTHON,
                    cwd=Path("/"),
                    env=env,
                    config={
                        "confine": spec,
                        "venv": str(self.root),
                        "heartbeat_s": self.settings.heartbeat_s,
                        "checkpoint": ckpt,
                    },
                    timeout=self.settings.kernel_start_timeout_s,
                    worker=self.worker,
                    tag=None if confinement.contained(spec) else new_tag(str(self.settings.home)),
                )
            except SandboxError as exc:
                if not await asyncio.to_thread(
                    confinement.downgrade, self.settings, paths, str(exc)
                ):
                    raise
                continue
            if kernel.ready.get("sandbox") not in ("landlock", "off"):
                log.warning("pad %r runs unsandboxed: %s", self.name, kernel.ready.get("sandbox"))
            return kernel

    def paths(self) -> sandboxing.PadPaths:
        return sandboxing.PadPaths(
            home=self.settings.home,
            workspace=self.cwd,
            root=self.root,
            tmp=self._tmp,
            guarded=self.guarded,
            server=SERVER_PATHS,
        )

    def spec(self) -> dict[str, Any]:
        """The launcher's spec for a process of this pad (see ``confinement.spec``)."""
        return pad_spec(self.settings, self.paths(), self._limits())

    async def install(self, specs: list[str] | None) -> str:
        """Install ``specs`` (None: restore requirements.txt) confined like the kernel, with
        the pad's environment plus the server's UV_* settings (its index, offline mode)."""
        if not self._tmp.is_dir():
            self._tmp = await asyncio.to_thread(sandboxing.fresh_tmp, self.root)
        env = sandboxing.installer_environment(os.environ, root=self.root, tmp=self._tmp)
        spec = await asyncio.to_thread(self.spec)
        timeout = self.settings.install_timeout_s
        with confinement.passed(spec) as fd:
            confine = (lambda argv: confinement.program_argv(fd, argv), env, (fd,))
            if specs is None:
                return await venv.restore(self.root, timeout, confine)
            return await venv.install(self.root, specs, timeout, confine)

    async def stopped(self) -> None:
        """The kernel stopped: what it left in its temp directory goes."""
        await asyncio.to_thread(sandboxing.clear_tmp, self.root)

    def kernel_env(self) -> dict[str, str]:
        """The allowlist (sandboxing.ENV_ALLOWED), the pad's model settings and its vault
        variables; never the server's keys or settings. The vault variables are remembered as
        given (see :meth:`secret_changes`)."""
        env = sandboxing.pad_environment(os.environ, root=self.root, tmp=self._tmp)
        env.update(self.llm_env)
        secrets = self._secret_source() if self._secret_source is not None else {}
        self.secrets_given = dict(secrets)
        env.update(secrets)
        return env

    def secret_changes(self, env: dict[str, str]) -> dict[str, str | None]:
        """What a running kernel must change to have vault variables ``env`` (None unsets)."""
        given = self.secrets_given
        changes: dict[str, str | None] = {k: v for k, v in env.items() if given.get(k) != v}
        changes.update({k: None for k in given if k not in env})
        return changes


def pad_spec(settings: Settings, paths: sandboxing.PadPaths, limits: PadLimits) -> dict[str, Any]:
    """The launcher's spec for a process with ``paths`` and ``limits`` (a pad's, or a
    program's of :func:`run_confined`; see ``confinement.spec``)."""
    wanted = limits.for_launcher()
    if settings.kernel_memory_limit_mb:
        wanted["address_space"] = settings.kernel_memory_limit_mb << 20
    return confinement.spec(settings, paths, wanted)


async def run_confined(
    settings: Settings,
    argv: Sequence[str],
    *,
    workspace: Path,
    guarded: tuple[Path, ...] = (),
    timeout: float,
    output_cap_chars: int,
    grace: float = 1.0,
    through: procgroup.TextFilter | None = None,
) -> procgroup.RunResult:
    """Run ``argv`` confined like a pad's process, though no pad's (the shell tool): working
    in ``workspace``, the home and ``guarded`` out of reach (hidden where the workspace lies
    in them), the allowlisted environment, a temp directory of its own under the home (made
    for this run, removed after it), a pad's limits (its process tree under the watchdog:
    stopped past one, the output says why). Every process it starts ends with it: its PID
    namespace, else its process group and a tag. See ``procgroup.run`` for the rest."""
    place = Path(await asyncio.to_thread(_program_place, settings.home))
    watched: list[int] = []
    stopped: list[str] = []  # why the watchdog stopped it (from the watchdog's thread)
    try:
        tmp = place / sandboxing.TMP_DIR
        paths = sandboxing.PadPaths(
            home=settings.home,
            workspace=workspace,
            root=place,
            tmp=tmp,
            guarded=guarded,
            server=SERVER_PATHS,
        )
        limits = PadLimits.from_settings(settings)
        spec = await asyncio.to_thread(pad_spec, settings, paths, limits)
        tag = None if confinement.contained(spec) else new_tag(str(settings.home))

        def watch(pid: int) -> None:
            watched.append(pid)
            WATCHDOG.watch(Watched(pid, limits, stop=stopped.append, busy=lambda: True))

        with confinement.passed(spec) as fd:
            result = await procgroup.run(
                confinement.program_argv(fd, list(argv)),
                pass_fds=(fd,),
                timeout=timeout,
                cwd=Path("/"),
                env=sandboxing.pad_environment(os.environ, root=place, tmp=tmp),
                output_cap_chars=output_cap_chars,
                grace=grace,
                tag=tag,
                through=through,
                on_start=watch,
            )
    finally:
        for pid in watched:
            WATCHDOG.forget(pid)
        await asyncio.to_thread(shutil.rmtree, place, True)
    if stopped:
        return replace(result, output=f"{result.output.rstrip()}\n[stopped: {stopped[0]}]\n")
    return result


def _program_place(home: Path) -> str:
    """A fresh private directory under ``<home>/programs`` with an empty ``tmp`` in it; the
    places of runs whose process is gone (killed before it could clean up) go first."""
    parent = private_dir(home / PROGRAMS_DIR)
    for entry in os.listdir(parent):
        owner = entry.split("-")[1] if entry.count("-") >= 2 else ""
        if owner.isdigit() and not running(int(owner)):
            shutil.rmtree(parent / entry, ignore_errors=True)
    place = tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=parent)
    sandboxing.fresh_tmp(Path(place))
    return place
