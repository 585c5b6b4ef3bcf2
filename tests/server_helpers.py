"""Start a real ``scratchpad serve`` on a free loopback port, for tests."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from scratchpad.isolation import cli_command


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_server(
    home: Path,
    cwd: Path,
    key: str,
    env: Mapping[str, str] | None = None,
    *,
    workspace: Path | None = None,
    port: int | None = None,
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """(url, process) of a server started (isolated, as ours are) in ``cwd`` whose pads live
    in ``home``, each working in a directory of its own there; with ``workspace`` bound, they
    all work in it and the home is ``<workspace>/.scratchpad`` instead. ``env``: more
    variables for it (over this process's); ``port``: where it listens (a free one by
    default)."""
    port = port or free_port()
    env = {**os.environ, **(env or {}), "SCRATCHPAD_HOME": str(home), "SCRATCHPAD_API_KEY": key}
    bound = [] if workspace is None else ["--workspace", str(workspace)]
    process = subprocess.Popen(
        cli_command("serve", "--port", str(port), *bound),
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def wait_healthy(url: str, process: subprocess.Popen[Any]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError(f"the server did not come up: {process.communicate()[0]}")
        time.sleep(0.05)


@contextmanager
def serving(handler: Callable[..., BaseHTTPRequestHandler]) -> Iterator[str]:
    """The base URL of a small HTTP server on a loopback port, answering with ``handler`` on
    a thread of its own (a service a probe calls, another site a page comes from)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class Relay:
    """A TCP relay from a loopback port of its own to ``port``: :meth:`cut` drops every
    connection through it at once (a network that fails mid-stream); new ones go through."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.cuts = 0
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self._lock:
            ends, self._open = self._open, []
            self.cuts += 1
        for end in ends:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self.listener.close()
        self.cut()
