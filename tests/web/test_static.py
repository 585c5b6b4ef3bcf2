"""The web UI's shell loads in a real browser, from the server alone."""

from __future__ import annotations

from playwright.sync_api import Page


def test_the_page_loads_its_module_from_the_server(page: Page) -> None:
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.goto("/")
    page.wait_for_selector("#app")
    assert page.title() == "Scratchpad"
    assert not failed
