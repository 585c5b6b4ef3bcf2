"""Logging a real browser in with a login link (no bearer key anywhere), and a page of another
origin that tries to use that browser's session."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from tests.server_helpers import serving
from tests.web.conftest import WebServer, login_link, screenshot

# A request another page may send without a preflight (no-cors, no body), with the browser's
# cookies: it would end the session. Its answer is opaque to the page either way.
ATTACK = """<!doctype html>
<title>waiting</title>
<script>
fetch("%(server)s/logout", {method: "POST", mode: "no-cors", credentials: "include"})
  .then(() => { document.title = "sent"; }, (e) => { document.title = "failed: " + e; });
</script>
"""
STATUS_OF = "(path) => fetch(path, {method: 'POST'}).then((r) => r.status)"


@pytest.fixture
def context(browser: Browser, web_server: WebServer) -> Iterator[BrowserContext]:
    """A browser context that never sends the key: only what a login gives it."""
    opened = browser.new_context(base_url=web_server.url, viewport={"width": 1280, "height": 800})
    yield opened
    opened.close()


@pytest.fixture
def other_site(tmp_path: Path, web_server: WebServer) -> Iterator[str]:
    """Another origin on this machine (127.0.0.1, another port: the same *site*, so a
    SameSite=Strict cookie still travels) serving a page that attacks the server."""
    (tmp_path / "attack.html").write_text(ATTACK % {"server": web_server.url})
    with serving(partial(SimpleHTTPRequestHandler, directory=str(tmp_path))) as url:
        yield url


def test_a_login_link_opens_the_ui_without_the_key(
    context: BrowserContext, web_server: WebServer
) -> None:
    page = context.new_page()
    before = page.goto("/")
    assert before is not None and before.status == 401
    assert "scratchpad login" in page.inner_text("body")
    page.goto(login_link(web_server))
    page.wait_for_selector("#app")
    assert page.url == f"{web_server.url}/" and page.title() == "Scratchpad"
    [cookie] = context.cookies()
    assert cookie["name"] == "scratchpad_session"
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"]
    assert page.evaluate("document.cookie") == ""  # invisible to scripts
    pads = page.evaluate("fetch('/v1/pads').then((r) => r.status)")
    assert pads == 200
    screenshot(page, "login-ui")


def test_another_origin_cannot_use_the_session(
    context: BrowserContext, web_server: WebServer, other_site: str
) -> None:
    page: Page = context.new_page()
    page.goto(login_link(web_server))
    page.wait_for_selector("#app")
    page.goto(f"{other_site}/attack.html")
    page.wait_for_function("document.title !== 'waiting'", timeout=10_000)
    assert page.title() == "sent"  # the request left the browser, with the cookie
    page.goto("/")
    page.wait_for_selector("#app")
    assert page.evaluate("fetch('/v1/pads').then((r) => r.status)") == 200  # still logged in
    # The same request from the server's own page goes through: the origin made the difference.
    assert page.evaluate(STATUS_OF, "/logout") == 200
    assert page.evaluate("fetch('/v1/pads').then((r) => r.status)") == 401


def test_a_login_link_followed_from_another_site_logs_in(
    context: BrowserContext, web_server: WebServer, other_site: str, tmp_path: Path
) -> None:
    """A link in a chat page elsewhere (localhost is another site than 127.0.0.1): the
    SameSite=Strict cookie must reach the page the link opens."""
    link = login_link(web_server, "/#/from-elsewhere")
    (tmp_path / "chat.html").write_text(f'<!doctype html><a id="go" href="{link}">log in</a>')
    page = context.new_page()
    page.goto(other_site.replace("127.0.0.1", "localhost") + "/chat.html")
    page.click("#go")
    page.wait_for_selector("#app")
    assert page.url == f"{web_server.url}/#/from-elsewhere" and page.title() == "Scratchpad"
