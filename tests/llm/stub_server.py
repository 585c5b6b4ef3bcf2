"""A local HTTP server that speaks the Anthropic Messages and OpenAI Chat Completions wire
formats (JSON and server-sent events), so the official SDK clients are exercised for real."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """What the stub answers to the next request: a JSON body, or SSE events."""

    body: Any = None
    status: int = 200
    events: list[tuple[str | None, Any]] | None = None  # (event name, data) for SSE
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # think before answering (for progress and timeout tests)


@dataclass
class StubServer:
    url: str
    replies: list[Reply]
    requests: list[dict[str, Any]]

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)


def _handler(state: StubServer, keep_alive: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.1 keeps a connection open for the next request, as real APIs do.
        protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {key.lower(): value for key, value in self.headers.items()}
            state.requests.append({"path": self.path, "headers": headers, "body": body})
            reply = state.replies.pop(0) if state.replies else Reply({"error": "no reply"}, 500)
            time.sleep(reply.delay_s)
            if reply.events is None:
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(reply.status)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            for name, data in reply.events:
                text = data if isinstance(data, str) else json.dumps(data)
                frame = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
                self.wfile.write(frame.encode())
                self.wfile.flush()
            self.close_connection = True

    return Handler


@contextmanager
def stub_server(*, keep_alive: bool = False) -> Iterator[StubServer]:
    state = StubServer("", [], [])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state, keep_alive))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
