"""Start a real ``scratchpad serve`` on a free loopback port, for tests."""

from __future__ import annotations

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
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """(url, process) of a server started (isolated, as ours are) in ``cwd`` whose pads live
    in ``home``, each working in a directory of its own there; with ``workspace`` bound, they
    all work in it and the home is ``<workspace>/.scratchpad`` instead. ``env``: more
    variables for it (over this process's)."""
    port = free_port()
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
