"""``/docs`` in a real browser: Swagger UI from the server's own files, under the server's
Content-Security-Policy, with no request leaving the server's origin."""

from __future__ import annotations

import httpx
from playwright.sync_api import ConsoleMessage, Page, Route

from tests.web.conftest import WebServer, screenshot

# The policy the server's pages get (a parallel part adds the header; the test adds it here
# so the page is held to it either way).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "frame-src 'self' blob: data:"
)


def with_csp(route: Route) -> None:
    response = route.fetch()
    route.fulfill(response=response, headers={**response.headers, "content-security-policy": CSP})


def test_docs_list_the_operations_from_this_server_alone(page: Page, web_server: WebServer) -> None:
    requested: list[str] = []
    problems: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error" or "Content Security Policy" in message.text:
            problems.append(f"console {message.type}: {message.text}")

    page.on("console", on_console)
    page.route(f"{web_server.url}/docs", with_csp)
    page.goto("/docs")
    page.wait_for_selector(".opblock-summary-path", timeout=15_000)
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    screenshot(page, "docs")
    assert "/scratchpad/execute-stream" in [p.replace("\u200b", "") for p in paths]
    assert page.locator(".info .title").inner_text().startswith("Scratchpad")
    assert page.locator(".auth-wrapper .authorize").count() == 1  # the bearer scheme
    elsewhere = [url for url in requested if not url.startswith((web_server.url, "data:"))]
    assert not elsewhere
    assert f"{web_server.url}/openapi.json" in requested
    assert not problems


def test_the_document_needs_the_key_and_the_page_holds_none_of_it(web_server: WebServer) -> None:
    for path in ("/openapi.json", "/redoc"):
        refused = httpx.get(f"{web_server.url}{path}")
        assert refused.status_code == 401, path
    auth = {"Authorization": f"Bearer {web_server.key}"}
    assert httpx.get(f"{web_server.url}/redoc", headers=auth).status_code == 404
    page = httpx.get(f"{web_server.url}/docs")  # code only: its script reads the document
    assert page.status_code == 200 and "<script>" not in page.text and "style=" not in page.text
    assert "cdn" not in page.text.lower() and "/v1/" not in page.text
