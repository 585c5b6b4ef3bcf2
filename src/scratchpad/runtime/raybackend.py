"""Pads on a Ray cluster (SCRATCHPAD_BACKEND=ray): connecting, placing, finding actors.

Each pad is a named, detached actor (``scratchpad-pad-<dir>`` in SCRATCHPAD_RAY_NAMESPACE)
holding a local kernel on the node Ray placed it on (rayactor.py); the server talks to it
through a :class:`~scratchpad.runtime.raypad.RayRuntime`. Pad directories (requirements,
history, checkpoint, workspace) live in SCRATCHPAD_RAY_STORE, a directory every node reaches
(default: the home, which every node of a cluster on this machine reaches), so the listing,
histories and files are read here as for local pads. A bound workspace (``serve
--workspace``) is every pad's working directory, as locally: every node must reach it too.

Ray's ports run arbitrary code for whoever reaches them: a cluster off this machine is
refused unless SCRATCHPAD_RAY_TRUST_NETWORK=1 says the network is the user's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scratchpad._version import __version__
from scratchpad.config import Settings, is_loopback_host
from scratchpad.errors import ClusterError, ConfigError, PadError, ScratchpadError
from scratchpad.padnames import dir_name
from scratchpad.runtime.backends import HomeBackend, Running, Secrets
from scratchpad.runtime.base import ScratchpadRuntime
from scratchpad.runtime.padinfo import PadInfo
from scratchpad.runtime.placement import PadResources, check_resources

log = logging.getLogger(__name__)
ACTOR_PREFIX = "scratchpad-pad-"
INSTALL_HINT = "pip install 'scratchpad[ray]'"
_connecting = threading.Lock()
VERDICT_S = 120.0  # how long an unreachable actor is asked about before its node counts lost
VERDICT_POLL_S = 0.5
REACH_TIMEOUT_S = 5.0  # how long a cluster's address may take to accept a connection
NODE_ID = re.compile(r"Node Id: ([0-9a-f]{8,})")


def refuse_remote_address(settings: Settings) -> None:
    """ConfigError for a Ray address off this machine, unless the network is trusted."""
    address = settings.ray_address
    if address is None or settings.ray_trust_network:
        return
    if address == "auto":
        raise ConfigError(
            "SCRATCHPAD_RAY_ADDRESS=auto may name a cluster off this machine: give its "
            "address (127.0.0.1:6379), or set SCRATCHPAD_RAY_TRUST_NETWORK=1"
        )
    if not is_loopback(address):
        raise ConfigError(
            f"SCRATCHPAD_RAY_ADDRESS={address} is not on this machine. Ray's ports run any "
            "code for whoever reaches them, and pads hold credentials: set "
            "SCRATCHPAD_RAY_TRUST_NETWORK=1 only if that network is yours alone"
        )


def is_loopback(address: str) -> bool:
    """Whether a Ray address (``host:port``, ``ray://host:port``) is on this machine."""
    return is_loopback_host(
        urlsplit(address if "://" in address else f"ray://{address}").hostname or ""
    )


def ray_module() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            f"SCRATCHPAD_BACKEND=ray needs Ray: {INSTALL_HINT} (Ray >= 2.58)"
        ) from None
    return ray


class _NoSignalNote(logging.Filter):
    """Ray says it set no SIGTERM handler when joined from a thread: as it should not (the
    server's own shutdown handles the signal); the note is dropped, nothing else."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


def connect(settings: Settings) -> None:
    """Join the cluster once per process (blocking): the one SCRATCHPAD_RAY_ADDRESS names,
    else a Ray of this machine started on the loopback interface."""
    ray = ray_module()
    with _connecting:
        if ray.is_initialized():
            return
        logging.getLogger("ray._private.worker").addFilter(_NoSignalNote())
        quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
        if settings.ray_address is None:  # "local": never an existing cluster by accident
            ray.init(
                address="local", namespace=settings.ray_namespace, include_dashboard=False,
                _node_ip_address="127.0.0.1", **quiet,
            )  # fmt: skip
        else:
            reachable(settings.ray_address)
            if is_loopback(settings.ray_address):
                # Ray rewrites a loopback address to this host's outward one (its "reachable
                # from other nodes" rule) and then never reaches a cluster that listens on
                # loopback only: a cluster on this machine is reached where it listens.
                from ray._private import ray_constants

                ray_constants.ENABLE_RAY_CLUSTER = False
            ray.init(address=settings.ray_address, namespace=settings.ray_namespace, **quiet)
        if not settings.ray_allow_no_auth and not token_auth(ray):
            ray.shutdown()
            raise ConfigError(
                "the Ray cluster does not ask for a token: any pad could connect to it and run "
                "code outside its sandbox. Start the cluster with RAY_AUTH_MODE=token (and a "
                "token: `ray get-auth-token --generate`), or set "
                "SCRATCHPAD_RAY_ALLOW_NO_AUTH=1 if every pad may do that"
            )


def reachable(address: str) -> None:
    """ClusterError unless something listens at a Ray address (``ray.init`` would retry for
    minutes: a pad's first request must not hang on a cluster that is down)."""
    parts = urlsplit(address if "://" in address else f"ray://{address}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        raise ConfigError(
            f"SCRATCHPAD_RAY_ADDRESS={address} is not host:port (e.g. 127.0.0.1:6379)"
        )
    try:
        socket.create_connection((parts.hostname, port), timeout=REACH_TIMEOUT_S).close()
    except OSError as exc:
        raise ClusterError(
            f"no Ray cluster answers at {address} ({exc.strerror or exc}); start it, or fix "
            "SCRATCHPAD_RAY_ADDRESS"
        ) from None


def token_auth(ray: Any) -> bool:
    """Whether this process's Ray connection uses token authentication."""
    try:
        from ray._private.authentication.authentication_utils import is_token_auth_enabled
    except ImportError:  # a Ray that moved it: refuse rather than guess
        return False
    return bool(is_token_auth_enabled())


class RayBackend(HomeBackend):
    """Pads held by Ray actors; their directories in the store (see the module's text)."""

    def __init__(self, settings: Settings, workspace: Path | None, secrets: Secrets) -> None:
        refuse_remote_address(settings)
        ray_module()
        super().__init__(settings, settings.ray_store or settings.home)
        self.workspace = workspace  # every pad's working directory (every node must reach it)
        self.secrets = secrets
        self.default_resources = PadResources(
            settings.ray_cpus, settings.ray_gpus, settings.ray_memory_mb
        )
        from scratchpad.runtime.rayactor import store_settings

        self._actor_settings = store_settings(settings, self.home)

    def build(self, name: str) -> ScratchpadRuntime:
        from scratchpad.runtime.raypad import RayRuntime

        return RayRuntime(name, backend=self)

    def place(self, pad: ScratchpadRuntime, resources: Mapping[str, object]) -> None:
        from scratchpad.runtime.raypad import RayRuntime

        checked = check_resources(resources, self.default_resources)
        if isinstance(pad, RayRuntime):
            pad.resources = checked

    def check_placement(self, resources: Mapping[str, object]) -> None:
        check_resources(resources, self.default_resources)

    def set_limits(self, pad: ScratchpadRuntime, limits: Mapping[str, object]) -> None:
        from scratchpad.runtime.raypad import RayRuntime

        if isinstance(pad, RayRuntime):
            pad.set_limits(limits)

    async def update_secrets(self, pad: ScratchpadRuntime, env: Any) -> bool:
        from scratchpad.runtime.raypad import RayRuntime

        return isinstance(pad, RayRuntime) and await pad.update_secrets(env())

    async def let_go(self, pad: ScratchpadRuntime, reason: str) -> None:
        """A stopping server leaves Ray pads running: the cluster holds them (a second
        server may be using them), and each sleeps by itself when idle."""
        await pad.detach()

    async def follow(self, pad: Callable[[], ScratchpadRuntime], cell_id: str) -> None:
        from scratchpad.runtime.raypad import RayRuntime

        runtime = pad()
        if isinstance(runtime, RayRuntime):
            await runtime.follow(cell_id)

    async def list_pads(self, running: Running, closed: set[str]) -> list[PadInfo]:
        """The store's pads; those whose actor runs on the cluster but not for this server
        (another server's, or one before a restart) as their actor says they are, and those
        held here whose actor went to sleep by itself as the store says (asleep)."""
        live = await self._live_names()
        running = [(pad, watch) for pad, watch in running if pad.name in live]  # else asleep
        listed = await super().list_pads(running, closed)
        held = {pad.name for pad, _ in running}
        asked = [self._as_live(info, info.name in held) for info in listed if info.name in live]
        told = {info.name: info for info in await asyncio.gather(*asked)}
        return [told.get(info.name, info) for info in listed]

    async def _live_names(self) -> set[str]:
        """Names of the pads whose actor is alive in this namespace."""
        await asyncio.to_thread(connect, self.settings)
        ray = ray_module()
        named = await asyncio.to_thread(ray.util.list_named_actors, all_namespaces=True)
        prefix, namespace = ACTOR_PREFIX, self.settings.ray_namespace
        dirs = {
            entry["name"][len(prefix) :]
            for entry in named
            if entry.get("namespace") == namespace and entry["name"].startswith(prefix)
        }
        return {name for name in self.names_on_disk() if dir_name(name) in dirs}

    async def _as_live(self, info: PadInfo, held: bool) -> PadInfo:
        """A live pad's line as its actor tells it: the memory of its kernel's processes
        (on their node); for one another server holds, its status too."""
        actor = await self.find(info.name)
        if actor is None:
            return info
        try:
            state = await actor.state.remote()
        except Exception:  # gone meanwhile: as the store says
            return info
        info = replace(info, memory_bytes=state.get("memory_bytes"))
        if held:
            return info
        status = "stopped" if state.get("closed") else "busy" if state.get("busy") else "idle"
        return replace(info, status=status, queued=int(state.get("queued") or 0))

    # -- actors -----------------------------------------------------------------------------
    def cwd_of(self, name: str) -> str | None:
        """The bound workspace (every pad's), or None: the pad's own in the store."""
        return None if self.workspace is None else str(self.workspace)

    def actor_name(self, name: str) -> str:
        return ACTOR_PREFIX + dir_name(name)

    async def actor(self, name: str, resources: PadResources, limits: Mapping[str, object]) -> Any:
        """Pad ``name``'s actor: the live one (whoever made it), else a new one placed by
        ``resources``, whose kernel limits match them (``limits`` over those)."""
        await asyncio.to_thread(connect, self.settings)
        ray = ray_module()
        options = {
            "name": self.actor_name(name), "namespace": self.settings.ray_namespace,
            "lifetime": "detached", "get_if_exists": True,
            # at most once: a lost node's cell is never run again; the pad is made again at
            # its next use (with the server's credentials), not restarted by Ray without them
            "max_restarts": 0, "max_task_retries": 0, "max_concurrency": 1000,
            **resources.options(),
        }  # fmt: skip
        kernel_limits = {**resources.limits(), **limits}
        actor_class = _actor_class(ray)
        actor = await asyncio.to_thread(
            lambda: actor_class.options(**options).remote(
                name, self._actor_settings, kernel_limits, self.cwd_of(name)
            )
        )
        await self._placed(actor, name, resources)
        return actor

    async def _placed(self, actor: Any, name: str, resources: PadResources) -> None:
        """Wait until the actor runs on a node (its first answer), at most
        SCRATCHPAD_RAY_PLACE_TIMEOUT_S; else it is killed, so the pad's name is free again,
        and ClusterError says what no node had. Its Scratchpad must be this server's."""
        waited = self.settings.ray_place_timeout_s
        try:
            async with asyncio.timeout(waited):
                version = (await actor.state.remote()).get("version")
        except TimeoutError:
            await self.kill(actor)
            raise ClusterError(
                f"pad {name!r}: no node of the Ray cluster took it within {waited:g} s "
                f"(it asked for {resources.to_dict()}; the cluster has "
                f"{await asyncio.to_thread(ray_module().cluster_resources)}); ask for less, "
                "or add a node that has it (SCRATCHPAD_RAY_PLACE_TIMEOUT_S: how long to wait)"
            ) from None
        except Exception as exc:
            if await self.lost(exc, None) is None:
                raise self.unwrapped(exc, name) from None
            raise ClusterError(f"pad {name!r}: its new actor died as it started: {exc}") from None
        if version != __version__:
            raise ClusterError(
                f"pad {name!r}: its node runs Scratchpad {version}, this server {__version__}: "
                "install the same version on the server and every node"
            )

    async def find(self, name: str) -> Any:
        """Pad ``name``'s live actor, or None."""
        await asyncio.to_thread(connect, self.settings)
        ray = ray_module()
        try:
            return await asyncio.to_thread(
                ray.get_actor, self.actor_name(name), namespace=self.settings.ray_namespace
            )
        except ValueError:
            return None

    async def kill(self, actor: Any) -> None:
        ray = ray_module()
        try:
            await asyncio.to_thread(ray.kill, actor, no_restart=True)
        except Exception as exc:  # gone already
            log.debug("killing a pad's actor: %r", exc)

    # -- errors -----------------------------------------------------------------------------
    async def lost(self, exc: BaseException, actor: Any) -> str | None:
        """How the pad's actor was lost ("the node it ran on died", ...), or None when
        ``exc`` is any other error. An actor that cannot be reached is asked again until
        Ray decides (its node is declared dead, or it answers), at most ``VERDICT_S``."""
        from ray import exceptions

        deadline = asyncio.get_running_loop().time() + VERDICT_S
        while isinstance(exc, exceptions.ActorUnavailableError) and actor is not None:
            if asyncio.get_running_loop().time() > deadline:
                return "its node stopped answering"
            await asyncio.sleep(VERDICT_POLL_S)
            try:
                await actor.ping.remote()
            except Exception as again:
                exc = again
            else:
                return "its actor stopped answering for a while"
        if isinstance(exc, exceptions.ActorDiedError):
            text = str(exc)
            if "node has died" in text or "node died" in text:
                return f"node lost: {_node_of(text)}"
            return "its actor died"
        if isinstance(exc, exceptions.ActorUnavailableError):
            return "its actor could not be reached"
        return None

    def died(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the actor is dead (for whatever reason)."""
        from ray import exceptions

        return isinstance(exc, exceptions.ActorDiedError)

    def stop_stream(self, stream: Any) -> None:
        """Let go of a cell's stream nobody reads (its cell runs on in the actor)."""
        with contextlib.suppress(Exception):
            ray_module().cancel(stream)

    def unwrapped(self, exc: BaseException, name: str) -> BaseException:
        """The error the actor raised, as it was (Ray wraps it), else a PadError (a
        ClusterError when Ray itself failed)."""
        from ray import exceptions

        if isinstance(exc, exceptions.RayTaskError):
            cause = getattr(exc, "cause", None)
            if isinstance(cause, ScratchpadError | ValueError | TypeError):
                return cause
            return PadError(f"pad {name!r}: {type(cause or exc).__name__}: {cause or exc}")
        if isinstance(exc, ScratchpadError):
            return exc
        return ClusterError(f"pad {name!r}: the Ray cluster failed: {exc}")


@functools.cache
def _actor_class(ray: Any) -> Any:
    """The pads' actor class, made once per process (Ray exports it to the cluster once)."""
    from scratchpad.runtime.rayactor import PadActor

    return ray.remote(PadActor)


def _node_of(text: str) -> str:
    """The node a Ray error names, shortly."""
    found = NODE_ID.search(text)
    return f"the node {found.group(1)[:12]} it ran on died" if found else "the node it ran on died"
