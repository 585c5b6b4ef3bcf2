"""What the browser tests of credential forms share: a real server whose probe model is a
script file (rewritten per test: the server reads it on every probe), and a local service
that checks a bearer token and can hold its answer, so a test sees the form mid-probe."""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.connect.services import HTTP_CHECK, TOKEN, BearerHandler, http_form
from tests.server_helpers import running_server, serving
from tests.web.conftest import WebServer

HOLD_S = 60  # the longest a held answer waits for its release


class Gate:
    """Open by default; `hold()` makes the service's answers wait until `release()`."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.open.set()
        self.waiting = threading.Event()  # a request is being held

    def hold(self) -> None:
        self.waiting.clear()
        self.open.clear()

    def release(self) -> None:
        self.open.set()


@contextmanager
def gated_service(gate: Gate) -> Iterator[str]:
    """The base URL of a bearer-token service (``GET /me``) whose answers wait at ``gate``."""

    class Handler(BearerHandler):
        def do_GET(self) -> None:
            gate.waiting.set()
            gate.open.wait(HOLD_S)
            super().do_GET()

    try:
        with serving(Handler) as url:
            yield url
    finally:
        gate.release()


# the service may hold its answer (to show the form mid-probe): the cell waits longer
CHECK = HTTP_CHECK.replace("timeout=5", "timeout=60")


def call(tool: str, **arguments: Any) -> list[dict[str, Any]]:
    """One turn of the scripted probe: one tool call."""
    return [{"name": tool, "input": arguments}]


STATUS = call("set_status", text="Calling the service")
CELL = call(
    "scratchpad", action="exec", name="probe", code=CHECK, one_line_description="Call GET /me"
)
SUCCESS = call("report_success", summary="The service answered as alice.")
FAILURE = call(
    "report_failure", error="The service refused the key.", follow_up="Check the key and retry."
)


@dataclass(frozen=True)
class ProbeServer:
    """The server, the probe's script file, the service's URL and its gate."""

    server: WebServer
    script: Path
    service: str
    gate: Gate

    def plays(self, *turns: list[dict[str, Any]]) -> None:
        """The next probe makes these moves (then says "Done.")."""
        self.script.write_text(json.dumps([*turns, "Done."]))


@contextmanager
def probe_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProbeServer]:
    root = tmp_path_factory.mktemp("webprobe")
    home, workspace, script = root / "home", root / "workspace", root / "probe.json"
    workspace.mkdir()
    script.write_text(json.dumps(["Done."]))
    key = secrets.token_urlsafe(24)
    gate = Gate()
    env = {"SCRATCHPAD_PROBE_MODEL": f"scripted:{script}"}
    with gated_service(gate) as service, running_server(home, workspace, key, env) as (url, proc):
        yield ProbeServer(WebServer(url, key, home, workspace, proc), script, service, gate)


__all__ = ["CELL", "FAILURE", "STATUS", "SUCCESS", "TOKEN", "Gate", "ProbeServer", "call"]


def labelled_form(**more: Any) -> dict[str, Any]:
    """The test service's form as a person sees it in the panel: labels and an icon."""
    fields = [
        {"name": "base_url", "label": "Base URL", "type": "url", "required": True},
        {"name": "api_key", "label": "API key", "type": "password", "required": True},
    ]
    return http_form(logo="plug", fields=fields, **more)
