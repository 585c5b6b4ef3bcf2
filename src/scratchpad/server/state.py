"""Which server serves a home directory.

The running ``scratchpad serve`` holds an exclusive lock on ``<home>/server.serving.lock`` for
its whole life, and writes ``<home>/server.json`` (pid, host, port, bound workspace) once it
listens. "Someone
holds the lock" is the only reliable sign that it runs (pids are reused); the record says where.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.fsutil import PRIVATE_FILE_MODE, atomic_write_text, open_private, private_dir

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
STATE_FILE = "server.json"
LOG_FILE = "server.log"
SERVING_LOCK = "server.serving.lock"


@dataclass(frozen=True, slots=True)
class ServerRecord:
    pid: int
    host: str
    port: int
    workspace: str | None = None  # the bound workspace, if the server has one

    @property
    def url(self) -> str:
        """Where a client on this machine reaches it (a wildcard bind answers on loopback)."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"


class ServingLock:
    """The lock a server holds while it runs (released by the kernel when it dies)."""

    def __init__(self, settings: Settings) -> None:
        self.path = settings.home / SERVING_LOCK
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock; False when another server holds it."""
        fd = open_private(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def server_alive(settings: Settings) -> bool:
    """Whether a server holds this home's serving lock right now."""
    try:
        fd = os.open(settings.home / SERVING_LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def state_path(settings: Settings) -> Path:
    return settings.home / STATE_FILE


def log_path(settings: Settings) -> Path:
    return settings.home / LOG_FILE


def read_record(settings: Settings) -> ServerRecord | None:
    """The recorded server, or None when there is none or the file is not ours to read."""
    try:
        data = json.loads(state_path(settings).read_text(encoding="utf-8"))
        workspace = data.get("workspace")
        return ServerRecord(
            pid=int(data["pid"]),
            host=str(data["host"]),
            port=int(data["port"]),
            workspace=str(workspace) if workspace else None,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def running_record(settings: Settings) -> ServerRecord | None:
    """The record of the server that runs for this home, if one does."""
    record = read_record(settings)
    return record if record is not None and server_alive(settings) else None


def write_record(settings: Settings, record: ServerRecord) -> None:
    private_dir(settings.home)
    text = json.dumps(asdict(record)) + "\n"
    atomic_write_text(state_path(settings), text, mode=PRIVATE_FILE_MODE)


def clear_record(settings: Settings, pid: int) -> None:
    """Remove the record if it still names ``pid`` (a newer server keeps its own)."""
    record = read_record(settings)
    if record is not None and record.pid == pid:
        with contextlib.suppress(FileNotFoundError):
            state_path(settings).unlink()
