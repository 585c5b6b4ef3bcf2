"""A web app that a pad serves on another port of 127.0.0.1, visited by the person's browser
while it is logged in: browsers send cookies to every port of a host, so that app receives
whatever the browser keeps for the host. Nothing it receives may be replayed against the
server: every header it saw, sent back with the server's own ``Host`` and a forged ``Origin``
(or none), grants no connection, reads no datasource, runs no code and mints no login link,
while the person's own tab still can."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page

from tests.server_helpers import serving
from tests.web.conftest import API_JSON, WebServer

ENGINE, NAME, SECRET = "http-api-key", "prod", "replay-secret-7c41d0"
VICTIM = "victim"  # a pad whose grant of the connection was revoked
PAGE = b"""<!doctype html><title>a pad's app</title>
<img src="/pixel.png" alt=""><script>fetch("/beacon", {credentials: "include"})</script>"""
HOP_BY_HOP = {"host", "connection", "content-length", "keep-alive", "accept-encoding"}


@dataclass
class PadApp:
    """What the pad's app saw: the headers of every request the browser sent it."""

    url: str
    received: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def headers(self) -> list[dict[str, str]]:
        with self.lock:
            return [dict(seen) for seen in self.received]


@pytest.fixture
def pad_app() -> Iterator[PadApp]:
    found = PadApp("")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with found.lock:
                found.received.append({k.lower(): v for k, v in self.headers.items()})
            body = PAGE if self.path == "/" else b""
            self.send_response(200)
            self.send_header("Content-Type", "text/html" if body else "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        found.url = url
        yield found


@pytest.fixture
def bearer(web_server: WebServer) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {web_server.key}"}
    with httpx.Client(base_url=web_server.url, headers=headers, timeout=60) as client:
        yield client


@pytest.fixture
def revoked(bearer: httpx.Client) -> None:
    """A saved connection, revoked from the pad ``victim``."""
    fields = {"base_url": "https://api.example.com", "api_key": SECRET}
    body = {"engine": ENGINE, "name": NAME, "fields": fields, "secure_keys": ["api_key"]}
    assert bearer.post("/v1/datasources", json=body).status_code == 200
    gone = bearer.delete(f"/v1/pads/{VICTIM}/grants/{ENGINE}/{NAME}")
    assert gone.status_code == 200 and gone.json()["connections"] == []


def attempts() -> list[tuple[str, str, dict[str, Any] | None]]:
    """(method, path, body): grant the revoked connection, read it, run code, mint a link."""
    code = "open('replayed.txt', 'w').write('ran')"
    return [
        ("POST", f"/v1/pads/{VICTIM}/grants", {"engine": ENGINE, "name": NAME}),
        ("GET", f"/v1/datasources/{ENGINE}/{NAME}", None),
        ("POST", "/scratchpad/execute-stream", {"name": "replayed", "code": code}),
        ("POST", "/v1/login-links", {"next": "/"}),
    ]


def replays(seen: dict[str, str], server: str) -> Iterator[dict[str, str]]:
    """The headers the app saw, as it would send them on: to the server's own Host, with the
    server's Origin forged, and with no Origin at all."""
    kept = {k: v for k, v in seen.items() if k not in HOP_BY_HOP and k != "origin"}
    host = server.removeprefix("http://")
    yield {**kept, "host": host, "origin": server}
    yield {**kept, "host": host}


def test_what_a_pads_app_receives_cannot_be_replayed(
    page: Page, web_server: WebServer, pad_app: PadApp, bearer: httpx.Client, revoked: None
) -> None:
    assert page.evaluate(API_JSON, "/v1/server")["version"]  # the person's tab is logged in
    visit = page.context.new_page()  # the same browser, another tab: the pad's app
    visit.goto(pad_app.url)
    visit.wait_for_function("document.images[0].complete")
    received = pad_app.headers()
    assert len(received) >= 2, received  # the page and what it loaded

    answers: list[tuple[str, int]] = []
    with httpx.Client(base_url=web_server.url, timeout=60) as replay:
        for seen in received:
            for headers in replays(seen, web_server.url):
                for method, path, body in attempts():
                    answer = replay.request(method, path, headers=headers, json=body)
                    origin = headers.get("origin", "no Origin")
                    sent = "with a cookie" if "cookie" in headers else "without a cookie"
                    answers.append((f"{method} {path}, {origin}, {sent}", answer.status_code))
    let_in = [(what, status) for what, status in answers if status < 400]
    assert not let_in, let_in

    grants = bearer.get(f"/v1/pads/{VICTIM}/grants").json()["connections"]
    assert grants == []  # still revoked
    assert "replayed" not in [pad["name"] for pad in bearer.get("/v1/pads").json()["pads"]]
    assert not (web_server.workspace / "replayed.txt").exists()
    # The person's own tab, meanwhile, is still logged in and reads what the app could not.
    record = page.evaluate(API_JSON, f"/v1/datasources/{ENGINE}/{NAME}")
    assert record["engine"] == ENGINE and SECRET not in str(record)
