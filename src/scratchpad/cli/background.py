"""The server the CLI's pad commands talk to: the remote one named by settings, or the one
recorded for this home, started in the background when none answers."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx

from scratchpad.config import Settings
from scratchpad.errors import ConfigError, ScratchpadError
from scratchpad.server.auth import resolve_api_key
from scratchpad.server.state import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    ServerRecord,
    log_path,
    read_record,
    server_running,
)

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
LOCK_FILE = "server.lock"


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    api_key: str


def endpoint(settings: Settings) -> Endpoint:
    """Where pad commands go; starts a background server for this home if needed."""
    if settings.backend == "remote":
        return Endpoint(settings.remote_url or "", settings.remote_api_key or "")
    with _home_lock(settings):
        record = read_record(settings)
        if record is None or not _answers(record, settings):
            record = start_background(settings)
    return Endpoint(record.url, resolve_api_key(settings))


def running_record(settings: Settings) -> ServerRecord | None:
    """The recorded server if its process still runs."""
    record = read_record(settings)
    return record if record is not None and server_running(record) else None


def start_background(settings: Settings) -> ServerRecord:
    """Start ``scratchpad serve`` detached from this terminal, on the default port when it
    is free, and wait until it answers. Its output goes to ``<home>/server.log``."""
    port = DEFAULT_PORT if _port_free(DEFAULT_PORT) else _free_port()
    log = log_path(settings)
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "scratchpad.cli", "serve", "--port", str(port)]
    env = {**os.environ, "SCRATCHPAD_HOME": str(settings.home)}
    with log.open("ab") as output:
        process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in this terminal must not reach it
        )
    record = ServerRecord(pid=process.pid, host=DEFAULT_HOST, port=port)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ScratchpadError(
                f"the background server exited at start ({process.returncode}); "
                f"see {log}:\n{_tail(log)}"
            )
        if read_record(settings) == record and _answers(record, settings, wait_s=0):
            return record
        time.sleep(0.05)
    process.kill()
    raise ScratchpadError(f"the background server did not answer within {START_TIMEOUT_S:g}s")


def stop(settings: Settings) -> ServerRecord | None:
    """Stop this home's server (it closes its pads; venvs stay). None when none runs."""
    record = running_record(settings)
    if record is None:
        return None
    os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while server_running(record):
        if time.monotonic() > deadline:
            os.kill(record.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    return record


def _answers(record: ServerRecord, settings: Settings, wait_s: float = START_TIMEOUT_S) -> bool:
    """Whether the recorded server answers with this home's key; a server still starting
    gets ``wait_s`` to come up, a dead one none."""
    key = resolve_api_key(settings)
    deadline = time.monotonic() + wait_s
    while server_running(record):
        try:
            answer = httpx.get(
                f"{record.url}/v1/pads", headers={"Authorization": f"Bearer {key}"}, timeout=5
            )
        except httpx.HTTPError:
            answer = None
        if answer is not None and answer.status_code == 401:
            raise ConfigError(
                f"the server at {record.url} refused this home's key; it was started with "
                "another SCRATCHPAD_API_KEY. Use the same key, or stop it: scratchpad server stop"
            )
        if answer is not None and answer.status_code == 200:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def _home_lock(settings: Settings) -> Iterator[None]:
    """One CLI at a time decides whether to start the server (no two servers per home)."""
    settings.home.mkdir(parents=True, exist_ok=True)
    with (settings.home / LOCK_FILE).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((DEFAULT_HOST, port))
        except OSError:
            return False
        return True


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((DEFAULT_HOST, 0))
        return int(probe.getsockname()[1])


def _tail(path: os.PathLike[str], lines: int = 20) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError:
        return ""
