"""Browser tests: Playwright drives Debian's ``chromium`` (``executable_path``; Playwright's
own browser download is never used) against a real ``scratchpad serve`` on a loopback port.

Without chromium the tests skip and say what to install, unless ``SCRATCHPAD_REQUIRE_BROWSER``
is set (CI sets it): then they fail. Screenshots of the main states go to
``test-output/screenshots/`` (``SCRATCHPAD_TEST_OUTPUT`` moves it).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.server_helpers import running_server

CHROMIUM_FLAGS = [  # a closed network: no background connections, no first-run work
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
OUTPUT = Path(os.environ.get("SCRATCHPAD_TEST_OUTPUT", "test-output"))
SCREENSHOTS = OUTPUT / "screenshots"


def chromium_path() -> str:
    """Debian's chromium, or a clear skip (a failure where the browser is required)."""
    path = os.environ.get("SCRATCHPAD_BROWSER") or shutil.which("chromium") or ""
    if path and os.access(path, os.X_OK):
        return path
    why = (
        "browser tests need Debian's chromium: `apt-get install chromium` (as root; `make "
        "test` does it), or point SCRATCHPAD_BROWSER at a Chromium binary"
    )
    if os.environ.get("SCRATCHPAD_REQUIRE_BROWSER"):
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One browser per module: Playwright's sync API holds an event loop in this thread while
    it runs, which the asyncio tests of other modules must not meet."""
    executable = chromium_path()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@dataclass(frozen=True)
class WebServer:
    url: str
    key: str
    home: Path
    workspace: Path
    process: subprocess.Popen[str]


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    """A real server for one test module: its own home and workspace."""
    root = tmp_path_factory.mktemp("web")
    home, workspace = root / "home", root / "workspace"
    workspace.mkdir()
    key = secrets.token_urlsafe(24)
    with running_server(home, workspace, key) as (url, process):
        yield WebServer(url, key, home, workspace, process)


def login_link(web_server: WebServer, next_path: str = "/") -> str:
    """A one-time login link, asked for with the key as `scratchpad login` does."""
    answer = httpx.post(
        f"{web_server.url}/v1/login-links",
        headers={"Authorization": f"Bearer {web_server.key}"},
        json={"next": next_path},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["url"])


# What the UI's own code gets from a GET (api.js: the tab's session in its header).
API_STATUS = (
    "(path) => import('/static/api.js')"
    ".then((api) => api.request(path)).then((r) => r.status, (e) => e.status)"
)
API_JSON = "(path) => import('/static/api.js').then((api) => api.getJSON(path))"


@pytest.fixture
def page(browser: Browser, web_server: WebServer) -> Iterator[Page]:
    """A fresh browser context logged in as a person is: through a one-time login link, so
    every request of the page carries the tab's session (a header) and never the key."""
    context = browser.new_context(base_url=web_server.url, viewport={"width": 1280, "height": 800})
    opened = context.new_page()
    opened.goto(login_link(web_server))
    opened.wait_for_url(f"{web_server.url}/")
    yield opened
    context.close()


SETTLED = """() => Promise.all(document.getAnimations()
    .filter((a) => a.effect?.getComputedTiming().iterations !== Infinity)
    .map((a) => a.finished.catch(() => null)))"""


def screenshot(page: Page, name: str) -> Path:
    """Save a screenshot of the page's main state as ``<output>/screenshots/<name>.png``, once
    its entrance animations have ended (spinners go on)."""
    page.evaluate(SETTLED)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
