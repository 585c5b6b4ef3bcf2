"""``scratchpad serve``: run the app under uvicorn, on loopback unless a key is configured,
recorded in ``<home>/server.json`` while it runs (one server per home)."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import uvicorn

from scratchpad.config import Settings, is_loopback_host
from scratchpad.connect.probe import clear_stale_probes, stop_probes
from scratchpad.errors import ConfigError
from scratchpad.fsutil import private_dir
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime import confinement, workdir
from scratchpad.runtime.manager import ScratchpadManager, bound_settings
from scratchpad.runtime.proctree import kill_orphans
from scratchpad.scrub import scrub_logs
from scratchpad.server.app import create_app
from scratchpad.server.auth import key_path, resolve_api_key
from scratchpad.server.logfilter import hide_tokens
from scratchpad.server.login_routes import login_link
from scratchpad.server.state import (
    ServerRecord,
    ServingLock,
    clear_record,
    read_record,
    write_record,
)

SHUTDOWN_GRACE_S = 5  # running cells get this long to finish before their pads are closed
STOPPED = "the server stopped"


def check_binding(host: str, settings: Settings) -> None:
    """Refuse to expose pads beyond this machine with a key nobody chose."""
    if not is_loopback_host(host) and not settings.api_key:
        raise ConfigError(
            f"refusing to listen on {host} without SCRATCHPAD_API_KEY: anyone who can reach "
            "it could run code here. Set SCRATCHPAD_API_KEY, or bind 127.0.0.1"
        )


def banner(
    host: str,
    port: int,
    settings: Settings,
    login: str | None = None,
    workspace: Path | None = None,
) -> str:
    url = origin_of(host, port)
    where = "SCRATCHPAD_API_KEY" if settings.api_key else str(key_path(settings))
    pads = workdir.where_pads_work(settings.home, workspace)
    lines = [
        f"Scratchpad serving on {url}",
        f"  home:    {settings.home} (pads work in {pads})",
        f"  API key: {where}",
        f"  MCP:     {url}/mcp (streamable HTTP, same key)",
        f"  health:  {url}/healthz   API docs: {url}/docs",
    ]
    if login:
        note = "(works once, for 10 minutes; `scratchpad login` makes more)"
        lines[3:3] = [f"  web UI:  {login}", f"           {note}"]
    return "\n".join([*lines, *confinement.warnings(settings)])


def origin_of(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is recorded (port 0: any free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted sockets only then, and
    # without it Nagle + delayed ACKs add ~40 ms to every streamed response.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
        return sock
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror}; choose another --port "
            "(0 picks a free one)"
        ) from None


async def serve(
    host: str, port: int, settings: Settings | None = None, workspace: Path | None = None
) -> None:
    """Serve until SIGINT/SIGTERM: one server per home (its serving lock, the home made
    0700), recorded in ``<home>/server.json`` once it listens; shutdown closes every pad
    (venvs are kept). With a bound ``workspace`` every pad works in it and the home is
    ``<workspace>/.scratchpad``; without one each pad works in a directory of its own."""
    settings = settings or Settings.load()
    if workspace is not None:
        workspace = workspace.resolve()
        settings = bound_settings(settings, workspace)
    check_binding(host, settings)
    scrub_logs()
    private_dir(settings.home, tighten=True)  # a home made before it had to be 0700
    lock = ServingLock(settings)
    if not lock.acquire():
        record = read_record(settings)
        where = f" at {record.url} (pid {record.pid})" if record else ""
        raise ConfigError(
            f"a server for {settings.home} already runs{where}; use it, stop it with "
            "`scratchpad server stop`, or set SCRATCHPAD_HOME elsewhere"
        )
    try:
        await _serve_locked(host, listen(host, port), settings, workspace)
    finally:
        lock.release()


async def _serve_locked(
    host: str, sock: socket.socket, settings: Settings, workspace: Path | None
) -> None:
    port = sock.getsockname()[1]
    api_key = resolve_api_key(settings)
    leftovers = await kill_orphans(str(settings.home))
    if leftovers:
        print(f"stopped {leftovers} process(es) left by a server of this home that was killed")
    await asyncio.to_thread(clear_stale_probes, settings.home)  # with credentials they held
    manager = ScratchpadManager(workspace, settings=settings)
    pid = os.getpid()
    bound = None if workspace is None else str(workspace)
    write_record(settings, ServerRecord(pid=pid, host=host, port=port, workspace=bound))
    try:
        with ObservationStore(settings=settings) as store:
            app = create_app(
                manager,
                api_key=api_key,
                origin=origin_of(host, port),
                store=store,
                on_shutdown=lambda: clear_record(settings, pid),  # before uvicorn re-raises
            )
            print(banner(host, port, settings, login_link(app), workspace), flush=True)
            config = uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level="warning",
                lifespan="on",
                ws="none",  # no route speaks WebSocket (the guard refuses the scope too)
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
                timeout_keep_alive=settings.http_keepalive_s,  # uvicorn's 5 s raced clients
            )
            hide_tokens()  # after uvicorn configured its loggers
            await PadServer(config, manager).serve(sockets=[sock])
    finally:
        clear_record(settings, pid)


class PadServer(uvicorn.Server):
    """uvicorn, stopping the pads first: no new connections, running cells get
    ``SHUTDOWN_GRACE_S`` to finish, then every pad is closed (an idle kernel first saves its
    variables: a full checkpoint, bounded the same), so each open stream ends with its
    cell's final frame (saying the server stopped) before the connections are closed."""

    def __init__(self, config: uvicorn.Config, manager: ScratchpadManager) -> None:
        super().__init__(config)
        self.manager = manager

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SHUTDOWN_GRACE_S
        while any(self.manager.get(name).busy for name in self.manager.names()):
            if loop.time() > deadline:
                break
            await asyncio.sleep(0.05)
        await stop_probes(STOPPED)  # their streams end saying so, their pads are removed
        await self.manager.close_all(reason=STOPPED)
        await super().shutdown(sockets)
