"""The web UI's shell loads in a real browser, from the server alone."""

from __future__ import annotations

from playwright.sync_api import Page, expect


def test_the_page_loads_its_modules_from_the_server(page: Page) -> None:
    expect(page.get_by_role("heading", name="Pads")).to_be_visible()  # the login's page drawn
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.reload()
    expect(page.get_by_role("heading", name="Pads")).to_be_visible()
    assert page.title() == "Scratchpad"
    assert not failed
