"""How one pad's processes start: the kernel and the installer, each from the trusted base
interpreter through the pad's launcher (``inkernel/confine.py``, see ``confinement``), with
the pad's environment (the allowlist, its model settings, its vault variables) in its own
temp directory. Nothing of the pad (its venv's ``bin/``, its ``.pth`` files) runs before the
launcher has confined the process.

``LocalRuntime`` decides when a kernel starts; this module decides what it starts with.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scratchpad.config import Settings
from scratchpad.errors import SandboxError
from scratchpad.runtime import confinement, sandboxing, venv
from scratchpad.runtime.kernel import KernelProcess
from scratchpad.runtime.limits import PadLimits
from scratchpad.runtime.proctree import new_tag

log = logging.getLogger(__name__)
SecretEnv = Callable[[], dict[str, str]]  # the pad's vault variables, asked at each kernel start
SERVER_PATHS = sandboxing.server_paths()


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
        self.limits = PadLimits.from_settings(settings)

    async def spawn(self) -> KernelProcess:
        """One kernel, confined as this system allows (see ``confinement``); when its launcher
        refuses a mechanism, the next start does without it (unless the setting requires it)."""
        self._tmp = await asyncio.to_thread(sandboxing.fresh_tmp, self.root)
        while True:
            spec = await asyncio.to_thread(self.spec)
            paths = self.paths()
            try:
                kernel = await KernelProcess.spawn(
                    sandboxing.BASE_PYTHON,
                    cwd=Path("/"),
                    env=self.kernel_env(),
                    config={
                        "confine": spec,
                        "venv": str(self.root),
                        "heartbeat_s": self.settings.heartbeat_s,
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
        wanted = self.limits.for_launcher()
        if self.settings.kernel_memory_limit_mb:
            wanted["address_space"] = self.settings.kernel_memory_limit_mb << 20
        return confinement.spec(self.settings, self.paths(), wanted)

    async def install(self, specs: list[str] | None) -> str:
        """Install ``specs`` (None: restore requirements.txt) confined like the kernel, with
        the pad's environment plus the server's UV_* settings (its index, offline mode)."""
        if not self._tmp.is_dir():
            self._tmp = await asyncio.to_thread(sandboxing.fresh_tmp, self.root)
        env = sandboxing.installer_environment(os.environ, root=self.root, tmp=self._tmp)
        spec = await asyncio.to_thread(self.spec)
        confine = (lambda argv: confinement.program_argv(spec, argv), env)
        timeout = self.settings.install_timeout_s
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
