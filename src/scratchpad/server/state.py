"""Which server serves a home directory: ``<home>/server.json`` (pid, host, port), written by
``scratchpad serve`` while it runs and read by the CLI to find it."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.fsutil import atomic_write_text

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
STATE_FILE = "server.json"
LOG_FILE = "server.log"


@dataclass(frozen=True, slots=True)
class ServerRecord:
    pid: int
    host: str
    port: int

    @property
    def url(self) -> str:
        """Where a client on this machine reaches it (a wildcard bind answers on loopback)."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"


def state_path(settings: Settings) -> Path:
    return settings.home / STATE_FILE


def log_path(settings: Settings) -> Path:
    return settings.home / LOG_FILE


def read_record(settings: Settings) -> ServerRecord | None:
    """The recorded server, or None when there is none or the file is not ours to read."""
    try:
        data = json.loads(state_path(settings).read_text(encoding="utf-8"))
        return ServerRecord(pid=int(data["pid"]), host=str(data["host"]), port=int(data["port"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_record(settings: Settings, record: ServerRecord) -> None:
    atomic_write_text(state_path(settings), json.dumps(asdict(record)) + "\n")


def clear_record(settings: Settings, pid: int) -> None:
    """Remove the record if it still names ``pid`` (a newer server keeps its own)."""
    record = read_record(settings)
    if record is not None and record.pid == pid:
        with contextlib.suppress(FileNotFoundError):
            state_path(settings).unlink()


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): the signal check is all there is
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def server_running(record: ServerRecord) -> bool:
    """Whether the recorded pid is still a Scratchpad process (pids get reused)."""
    if not pid_alive(record.pid):
        return False
    try:
        command = Path(f"/proc/{record.pid}/cmdline").read_bytes()
    except OSError:
        return True
    return b"scratchpad" in command
