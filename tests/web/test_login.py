"""Logging a real browser in with a login link (no bearer key anywhere): the tab's session, kept
in the tab and sent as a header (no cookie); tabs, reloads, logging out (the whole login) and
form links; and a page of another origin that tries to use that browser's session."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.server_helpers import serving
from tests.web.conftest import API_STATUS, WebServer, login_link, screenshot
from tests.web.pending import open_form
from tests.web.probing import labelled_form

# A request another page may send without a preflight (no-cors, no body), with whatever the
# browser keeps for the host: it would end the session. Its answer is opaque to the page.
ATTACK = """<!doctype html>
<title>waiting</title>
<script>
fetch("%(server)s/logout", {method: "POST", mode: "no-cors", credentials: "include"})
  .then(() => { document.title = "sent"; }, (e) => { document.title = "failed: " + e; });
</script>
"""
SESSION = "sessionStorage.getItem('scratchpad.session')"
NOT_LOGGED_IN = "This tab is not logged in"


@pytest.fixture
def context(browser: Browser, web_server: WebServer) -> Iterator[BrowserContext]:
    """A browser context that never sends the key: only what a login gives it."""
    opened = browser.new_context(base_url=web_server.url, viewport={"width": 1280, "height": 800})
    yield opened
    opened.close()


@pytest.fixture
def other_site(tmp_path: Path, web_server: WebServer) -> Iterator[str]:
    """Another origin on this machine (127.0.0.1, another port: the same *site*, so a cookie
    would still travel) serving a page that attacks the server."""
    (tmp_path / "attack.html").write_text(ATTACK % {"server": web_server.url})
    with serving(partial(SimpleHTTPRequestHandler, directory=str(tmp_path))) as url:
        yield url


def logged_in(page: Page, link: str, url: str) -> None:
    page.goto(link)
    page.wait_for_url(f"{url}/")
    expect(page.get_by_role("heading", name="Pads")).to_be_visible()


def pads_status(web_server: WebServer, session: str) -> int:
    """What the API answers a session replayed by a program (no browser, no Origin)."""
    headers = {"X-Scratchpad-Session": session}
    return httpx.get(f"{web_server.url}/v1/pads", headers=headers, timeout=30).status_code


def test_a_login_link_logs_this_tab_in_without_a_cookie(
    context: BrowserContext, web_server: WebServer
) -> None:
    page = context.new_page()
    page.goto("/")
    expect(page.locator("main h1")).to_have_text(NOT_LOGGED_IN)
    expect(page.locator("main")).to_contain_text("scratchpad login")
    expect(page.locator("#server")).to_have_text("not signed in")
    screenshot(page, "login-needed")
    link = login_link(web_server)
    logged_in(page, link, web_server.url)
    assert page.title() == "Scratchpad" and "token" not in page.url
    assert context.cookies() == []  # nothing the browser would send to another port
    session = page.evaluate(SESSION)
    assert session and page.evaluate(API_STATUS, "/v1/pads") == 200
    assert page.evaluate("fetch('/v1/pads').then((r) => r.status)") == 401  # nothing ambient
    assert pads_status(web_server, session) == 200
    page.reload()  # sessionStorage outlives a reload of the tab
    expect(page.get_by_role("heading", name="Pads")).to_be_visible()
    assert page.evaluate(SESSION) == session
    page.goto(link)  # used up
    expect(page.locator("main h1")).to_have_text("This login link no longer works")
    screenshot(page, "login-spent")


def test_a_new_tab_asks_a_logged_in_tab_and_none_is_left_without(
    context: BrowserContext, web_server: WebServer
) -> None:
    first = context.new_page()
    logged_in(first, login_link(web_server), web_server.url)
    with context.expect_page() as opened:
        first.get_by_role("link", name="API docs").click()  # target=_blank, noopener
    docs = opened.value
    docs.wait_for_selector(".opblock-summary-path", timeout=15_000)
    second = context.new_page()
    second.goto("/#/vault")
    expect(second.locator(".vt-page h1")).to_have_text("Vault")
    for tab in (first, docs, second):
        tab.close()
    alone = context.new_page()  # no logged-in tab left to ask
    alone.goto("/")
    expect(alone.locator("main h1")).to_have_text(NOT_LOGGED_IN)
    alone.goto("/docs")
    expect(alone.locator("#swagger-ui")).to_contain_text("The API docs need a browser session")
    expect(alone.locator("#swagger-ui code").first).to_have_text("scratchpad serve")


def test_another_origin_cannot_use_the_session(
    context: BrowserContext, web_server: WebServer, other_site: str
) -> None:
    page: Page = context.new_page()
    logged_in(page, login_link(web_server), web_server.url)
    page.goto(f"{other_site}/attack.html")
    page.wait_for_function("document.title !== 'waiting'", timeout=10_000)
    assert page.title() == "sent"  # the request left the browser, with nothing of the session
    page.goto("/")
    expect(page.get_by_role("heading", name="Pads")).to_be_visible()
    assert page.evaluate(API_STATUS, "/v1/pads") == 200  # still logged in
    session = page.evaluate(SESSION)
    page.get_by_role("button", name="Log out").click()  # from the server's own page
    expect(page.locator("main h1")).to_have_text("Logged out")
    assert page.evaluate(SESSION) is None
    assert pads_status(web_server, session) == 401


def test_logging_out_ends_every_session_and_link_of_the_login(
    browser: Browser, context: BrowserContext, web_server: WebServer
) -> None:
    page = context.new_page()
    logged_in(page, login_link(web_server), web_server.url)
    make_link = "() => import('/static/api.js').then((api) => api.sendJSON('/v1/login-links', {}))"
    unused, used = page.evaluate(make_link)["url"], page.evaluate(make_link)["url"]
    elsewhere = browser.new_context(base_url=web_server.url)  # the person's other browser
    try:
        other = elsewhere.new_page()
        logged_in(other, used, web_server.url)
        minted = other.evaluate(SESSION)
        sibling = context.new_page()  # a tab the session was handed to
        sibling.goto("/")
        expect(sibling.get_by_role("heading", name="Pads")).to_be_visible()
        assert pads_status(web_server, minted) == 200

        page.get_by_role("button", name="Log out").click()
        expect(page.locator("main h1")).to_have_text("Logged out")
        expect(sibling.locator("main h1")).to_have_text("Logged out")
        assert pads_status(web_server, minted) == 401  # made by that login: gone with it
        other.reload()
        expect(other.locator("main h1")).to_have_text("This tab's session has ended")
        late = elsewhere.new_page()
        late.goto(unused)  # made before the logout, opened after it
        expect(late.locator("main h1")).to_have_text("This login link no longer works")
    finally:
        elsewhere.close()


def test_a_form_link_in_the_same_browser_leaves_the_full_session_working(
    context: BrowserContext, web_server: WebServer
) -> None:
    page = context.new_page()
    logged_in(page, login_link(web_server), web_server.url)
    full = page.evaluate(SESSION)
    for tab in (page, context.new_page()):  # the same tab, then another one
        link, form_id = open_form(web_server, labelled_form())
        tab.goto(link)
        expect(tab).to_have_url(f"{web_server.url}/connect/{form_id}")
        expect(tab.locator(".cn-page .fp-panel .fp-title")).to_be_visible()
        tab.reload()  # the form's session is kept for its page
        expect(tab.locator(".cn-page .fp-panel .fp-title")).to_be_visible()
    page.goto("/")
    expect(page.get_by_role("heading", name="Pads")).to_be_visible()
    assert page.evaluate(SESSION) == full and page.evaluate(API_STATUS, "/v1/pads") == 200
    assert pads_status(web_server, full) == 200


def test_a_login_link_followed_from_another_site_logs_in(
    context: BrowserContext, web_server: WebServer, other_site: str, tmp_path: Path
) -> None:
    """A link in a chat page elsewhere (localhost is another site than 127.0.0.1)."""
    link = login_link(web_server, "/#/from-elsewhere")
    (tmp_path / "chat.html").write_text(f'<!doctype html><a id="go" href="{link}">log in</a>')
    page = context.new_page()
    page.goto(other_site.replace("127.0.0.1", "localhost") + "/chat.html")
    page.click("#go")
    page.wait_for_selector("#app")
    assert page.url == f"{web_server.url}/#/from-elsewhere" and page.title() == "Scratchpad"
