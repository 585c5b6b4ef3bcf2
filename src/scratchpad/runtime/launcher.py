"""How one pad's processes start: the kernel and the installer, each with the pad's
environment (the allowlist, its model settings, its vault variables) and its sandbox (the
Landlock ruleset, the home hidden where the workspace holds it), in its own temp directory.

``LocalRuntime`` decides when a kernel starts; this module decides what it starts with.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.errors import SandboxError
from scratchpad.runtime import sandboxing, venv
from scratchpad.runtime.kernel import KernelProcess
from scratchpad.runtime.proctree import new_tag

log = logging.getLogger(__name__)
SecretEnv = Callable[[], dict[str, str]]  # the pad's vault variables, asked at each kernel start


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

    async def spawn(self) -> KernelProcess:
        """One kernel, sandboxed when the setting and this machine allow (see sandboxing);
        where the workspace holds the home, the kernel hides it in a mount namespace."""
        self._tmp = await asyncio.to_thread(sandboxing.fresh_tmp, self.root)
        hide = await asyncio.to_thread(
            sandboxing.hide_spec, self.settings, workspace=self.cwd, root=self.root, tmp=self._tmp
        )
        rules: list[sandboxing.Rule] = []

        def kept_rules() -> list[sandboxing.Rule]:
            rules.extend(self._rules(hidden=hide is not None))
            return rules

        config: dict[str, object] = {
            "memory_limit_mb": self.settings.kernel_memory_limit_mb,
            "heartbeat_s": self.settings.heartbeat_s,
        }
        async with self._ruleset(kept_rules) as ruleset:
            if ruleset is not None:
                config["sandbox"] = {
                    "fd": ruleset,
                    "require": self.settings.sandbox == "require",
                    "listed": [path for path, mode in rules if mode == "list"],  # for its errors
                    "hide": hide,
                }
            try:
                kernel = await self._start(config, ruleset)
            except SandboxError as exc:
                if hide is None or ruleset is None:
                    raise
                sandboxing.hiding_failed(str(exc))  # then the narrower rules, without hiding
                kernel = None
        if kernel is None:
            return await self.spawn()
        if "sandbox" in config and kernel.ready.get("sandbox") != "landlock":
            log.warning("pad %r runs unsandboxed: %s", self.name, kernel.ready.get("sandbox"))
        return kernel

    async def _start(self, config: dict[str, object], ruleset: int | None) -> KernelProcess:
        return await KernelProcess.spawn(
            venv.venv_python(self.root),
            cwd=self.cwd,
            env=self.kernel_env(),
            config=config,
            timeout=self.settings.kernel_start_timeout_s,
            worker=self.worker,
            tag=new_tag(str(self.settings.home)),
            pass_fds=() if ruleset is None else (ruleset,),
        )

    async def install(self, specs: list[str] | None) -> str:
        """Install ``specs`` (None: restore requirements.txt) sandboxed like the kernel, with
        the pad's environment plus the server's UV_* settings (its index, offline mode)."""
        if not self._tmp.is_dir():
            self._tmp = await asyncio.to_thread(sandboxing.fresh_tmp, self.root)
        env = sandboxing.installer_environment(os.environ, root=self.root, tmp=self._tmp)
        timeout = self.settings.install_timeout_s
        async with self._ruleset() as ruleset:
            if specs is None:
                return await venv.restore(self.root, timeout, (ruleset, env))
            return await venv.install(self.root, specs, timeout, (ruleset, env))

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

    @contextlib.asynccontextmanager
    async def _ruleset(
        self, rules: Callable[[], list[sandboxing.Rule]] | None = None
    ) -> AsyncIterator[int | None]:
        """The Landlock ruleset for a process of this pad (None: unsandboxed), closed after;
        ``rules`` are asked for only when it is built."""
        ruleset = await asyncio.to_thread(
            sandboxing.ruleset_for, self.settings, rules or self._rules
        )
        try:
            yield ruleset
        finally:
            if ruleset is not None:
                os.close(ruleset)

    def _rules(self, hidden: bool = False) -> list[sandboxing.Rule]:
        return sandboxing.pad_rules(
            home=self.settings.home,
            workspace=self.cwd,
            root=self.root,
            tmp=self._tmp,
            hidden=hidden,
            guarded=self.guarded,
        )
