"""The server the CLI's pad commands talk to: the remote one named by settings, or the one
that runs for this home, started in the background when none does."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx

from scratchpad.cli.output import err_console, shown
from scratchpad.config import Settings
from scratchpad.errors import ConfigError, ScratchpadError, error_from_http
from scratchpad.fsutil import open_private_append
from scratchpad.isolation import cli_command
from scratchpad.runtime import workdir
from scratchpad.server.auth import resolve_api_key
from scratchpad.server.state import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    ServerRecord,
    clear_record,
    log_path,
    read_record,
    running_record,
    server_alive,
)

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
LOCK_FILE = "server.lock"


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    api_key: str


def endpoint(settings: Settings) -> Endpoint:
    """Where pad commands go; starts a background server for this home if none runs."""
    if settings.backend == "remote":
        return Endpoint(settings.remote_url or "", settings.remote_api_key or "")
    key = resolve_api_key(settings)
    record = _answering(settings, key, wait_s=0)
    if record is None:
        with _home_lock(settings):  # one CLI at a time decides to start it
            record = _answering(settings, key, wait_s=START_TIMEOUT_S)
            if record is None:
                record = start_background(settings)
                _announce(settings, record)
    return Endpoint(record.url, key)


def checked(answer: httpx.Response) -> httpx.Response:
    """``answer`` if it succeeded, else the server's error raised as its class."""
    if answer.status_code >= 400:
        answer.read()
        try:
            body = answer.json()
        except ValueError:
            body = {}
        message = body.get("error") or f"the server answered {answer.status_code}"
        raise error_from_http(answer.status_code, body.get("type"), message)
    return answer


def running_endpoint(settings: Settings) -> Endpoint | None:
    """This home's server when one runs and answers (none is started); None otherwise."""
    if settings.backend == "remote" or not server_alive(settings):
        return None
    key = resolve_api_key(settings)
    record = _answering(settings, key, wait_s=START_TIMEOUT_S)
    return Endpoint(record.url, key) if record is not None else None


def start_background(settings: Settings) -> ServerRecord:
    """Start ``scratchpad serve`` detached from this terminal, on the default port when it
    is free (else any free port), and wait until it answers. Its log: ``<home>/server.log``."""
    if _port_free(DEFAULT_PORT):
        try:
            return _start(settings, DEFAULT_PORT)
        except ScratchpadError:  # taken in the meantime: any port will do
            pass
    return _start(settings, 0)


def stop(settings: Settings) -> ServerRecord | None:
    """Stop this home's server (it closes its pads; venvs stay). None when none runs."""
    record = running_record(settings)
    if record is None:
        return None
    _signal(record.pid, signal.SIGTERM)
    if not _wait_stopped(settings, STOP_TIMEOUT_S):
        _signal(record.pid, signal.SIGKILL)
        _wait_stopped(settings, 5.0)
    clear_record(settings, record.pid)
    return record


def _start(settings: Settings, port: int) -> ServerRecord:
    """``scratchpad serve`` isolated from the caller's directory (see isolation.py): run
    with ``-P`` from the home, which no pad writes."""
    log = log_path(settings)
    env = {**os.environ, "SCRATCHPAD_HOME": str(settings.home)}  # absolute (see Settings)
    if settings.observations_db is not None:
        env["SCRATCHPAD_OBSERVATIONS_DB"] = str(settings.observations_db)
    with open_private_append(log) as output:
        process = subprocess.Popen(
            cli_command("serve", "--port", str(port)),
            cwd=settings.home,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in this terminal must not reach it
        )
    try:
        return _wait_started(settings, process, log)
    except BaseException:  # it never answered as itself: it must not linger unrecorded
        _kill(settings, process)
        raise


def _wait_started(
    settings: Settings, process: subprocess.Popen[bytes], log: os.PathLike[str]
) -> ServerRecord:
    key = resolve_api_key(settings)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ScratchpadError(
                f"the background server exited at start ({process.returncode}); "
                f"see {log}:\n{_tail(log)}"
            )
        record = read_record(settings)
        if record is not None and record.pid == process.pid and _identifies(record, key):
            return record
        time.sleep(0.05)
    raise ScratchpadError(f"the background server did not answer within {START_TIMEOUT_S:g}s")


def describe(settings: Settings, record: ServerRecord) -> str:
    """Which server this is, as one line: its home, address, pid and where its pads work."""
    pads = workdir.where_pads_work(settings.home, record.workspace)
    return (
        f"pad server for {settings.home} on {record.url.removeprefix('http://')} "
        f"(pid {record.pid}; pads work in {pads})"
    )


def _announce(settings: Settings, record: ServerRecord) -> None:
    """Say on stderr (stdout may be an MCP channel) which server now runs, for which home:
    a second server is never started silently."""
    moved = "" if record.port == DEFAULT_PORT else f"; {_default_port_holder()}"
    err_console.print(
        f"[dim]started a {shown(describe(settings, record))}{moved}; "
        f"log: {shown(log_path(settings))}; stop it with `scratchpad server stop`[/dim]"
    )


def _default_port_holder() -> str:
    """Why a new server is not on the default port: most often the pad server of another
    home (a `make run` with another SCRATCHPAD_HOME), which its health check tells."""
    try:
        answer = httpx.get(f"http://{DEFAULT_HOST}:{DEFAULT_PORT}/healthz", timeout=2)
        pad_server = answer.status_code == 200 and answer.json() == {"ok": True}
    except (httpx.HTTPError, ValueError):
        pad_server = False
    if pad_server:
        return (
            f"port {DEFAULT_PORT} is taken by the pad server of another home (to use that "
            "one instead, set the SCRATCHPAD_HOME it serves)"
        )
    return f"port {DEFAULT_PORT} is taken by another program"


def _kill(settings: Settings, process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_TIMEOUT_S)
    clear_record(settings, process.pid)


def _answering(settings: Settings, key: str, wait_s: float) -> ServerRecord | None:
    """The running server of this home once it answers as itself; one still starting gets
    ``wait_s`` to come up, and none runs: None at once."""
    deadline = time.monotonic() + wait_s
    while server_alive(settings):
        record = read_record(settings)
        if record is not None and _identifies(record, key):
            return record
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)
    return None


def _identifies(record: ServerRecord, key: str) -> bool:
    """Whether the server at the record's address is the recorded process."""
    try:
        answer = httpx.get(
            f"{record.url}/v1/server", headers={"Authorization": f"Bearer {key}"}, timeout=5
        )
    except httpx.HTTPError:
        return False
    if answer.status_code == 401:
        raise ConfigError(
            f"the server at {record.url} refused this home's key; it was started with "
            "another SCRATCHPAD_API_KEY. Use the same key, or stop it: scratchpad server stop"
        )
    try:
        return answer.status_code == 200 and answer.json().get("pid") == record.pid
    except ValueError:
        return False


def _signal(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _wait_stopped(settings: Settings, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while server_alive(settings):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@contextlib.contextmanager
def _home_lock(settings: Settings) -> Iterator[None]:
    with open_private_append(settings.home / LOCK_FILE) as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind((DEFAULT_HOST, port))
        except OSError:
            return False
        return True


def _tail(path: os.PathLike[str], lines: int = 20) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError:
        return ""
