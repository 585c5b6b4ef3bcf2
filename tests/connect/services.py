"""Real local services a probe can test, and the probe's moves as a scripted model makes them."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from scratchpad.llm.messages import ToolCall

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
    server = ThreadingHTTPServer(("127.0.0.1", 0), BearerHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


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
