"""Real local services a probe can test, and the probe's moves as a scripted model makes them."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from scratchpad.llm.messages import ToolCall
from tests.server_helpers import serving

TOKEN = "tok_9f2c6e1b7d4a5830c2e1f0ab"


class BearerHandler(BaseHTTPRequestHandler):
    """``GET /me``: 200 with a user for the right bearer token, 401 otherwise."""

    token = TOKEN

    def do_GET(self) -> None:
        if self.path != "/me":
            self._answer(404, {"error": "no such path"})
        elif self.headers.get("Authorization") == f"Bearer {self.token}":
            self._answer(200, {"user": "alice"})
        else:
            self._answer(401, {"error": "invalid token"})

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:  # quiet
        pass


@contextmanager
def bearer_service() -> Iterator[str]:
    """The base URL of a service on a loopback port that checks a bearer token."""
    with serving(BearerHandler) as url:
        yield url


READ_ENV = """\
import json, os, stat, urllib.error, urllib.request
creds = {}
for line in open("credentials.env", encoding="utf-8"):
    key, _, raw = line.rstrip("\\n").partition("=")
    creds[key] = json.loads(raw)
print("env mode", oct(stat.S_IMODE(os.stat("credentials.env").st_mode)))
"""

HTTP_CHECK = (
    READ_ENV
    + """\
request = urllib.request.Request(
    creds["DS_BASE_URL"] + "/me", headers={"Authorization": "Bearer " + creds["DS_API_KEY"]}
)
try:
    with urllib.request.urlopen(request, timeout=5) as answer:
        print("HTTP", answer.status, json.loads(answer.read())["user"])
except urllib.error.HTTPError as exc:
    print("HTTP", exc.code)
"""
)

SQLITE_CHECK = (
    READ_ENV
    + """\
import sqlite3
with sqlite3.connect("file:" + creds["DS_PATH"] + "?mode=ro", uri=True) as db:
    print("rows", db.execute("select count(*) from items").fetchone()[0])
"""
)


def cell(code: str, description: str = "Check the credentials") -> ToolCall:
    return ToolCall(
        "scratchpad",
        {"action": "exec", "name": "probe", "code": code, "one_line_description": description},
    )


def call(tool: str, **arguments: Any) -> ToolCall:
    return ToolCall(tool, arguments)


def http_form(**more: Any) -> dict[str, Any]:
    return {
        "engine": "http-api-key",
        "title": "Connect the test service",
        "fields": [
            {"name": "base_url", "type": "url", "required": True},
            {"name": "api_key", "type": "password", "required": True},
        ],
        **more,
    }


def _postgres_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


@contextmanager
def postgres_service() -> Iterator[dict[str, str]]:
    """A throwaway PostgreSQL server on a loopback port (password auth), or a skip saying what
    is missing. As root it runs as the ``postgres`` user (initdb refuses root)."""
    initdb, server = _postgres_bin("initdb"), _postgres_bin("postgres")
    if initdb is None or server is None or shutil.which("psql") is None:
        pytest.skip(
            "PostgreSQL (initdb, postgres, psql) is not installed: apt-get install postgresql"
        )
    as_user: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root needs setpriv to start PostgreSQL as user postgres")
        as_user = ["setpriv", "--reuid", "postgres", "--regid", "postgres", "--init-groups"]
    base = Path(tempfile.mkdtemp(prefix="scratchpad-pg-"))
    base.chmod(0o755)
    password = "pg-pass-7c1e9a2f"
    (base / "pw").write_text(password)
    if as_user:
        shutil.chown(base, "postgres")
        shutil.chown(base / "pw", "postgres")
    data = base / "data"
    setup = ["-D", str(data), "-U", "prober", "--pwfile", str(base / "pw"), "-A", "scram-sha-256"]
    subprocess.run([*as_user, initdb, *setup], check=True, capture_output=True, timeout=120)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    process = subprocess.Popen(
        [*as_user, server, "-D", str(data), "-p", port, "-h", "127.0.0.1", "-k", str(base)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        ready = ["pg_isready", "-h", "127.0.0.1", "-p", port]
        while subprocess.run(ready, capture_output=True, check=False).returncode != 0:
            assert process.poll() is None and time.monotonic() < deadline, "postgres did not start"
            time.sleep(0.1)
        yield {"host": "127.0.0.1", "port": port, "database": "postgres", "user": "prober",
               "password": password}  # fmt: skip
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        shutil.rmtree(base, ignore_errors=True)


POSTGRES_CHECK = (
    READ_ENV
    + """\
import subprocess

env = {**os.environ, "PGPASSWORD": creds["DS_PASSWORD"], "PGCONNECT_TIMEOUT": "5"}
done = subprocess.run(
    ["psql", "-h", creds["DS_HOST"], "-p", creds["DS_PORT"], "-U", creds["DS_USER"],
     "-d", creds["DS_DATABASE"], "-tAc", "select 'logged in ' || 40 + 2"],
    env=env, capture_output=True, text=True, timeout=20,
)
print(done.stdout.strip() or done.stderr.strip()[:200])
"""
)
