"""The web UI's shell loads in a real browser, from the server alone."""

from __future__ import annotations

from playwright.sync_api import Page, expect


def test_the_page_loads_its_modules_from_the_server(page: Page) -> None:
    fresh = page.context.new_page()  # the login's session; no earlier document to cut off
    failed: list[str] = []
    fresh.on("requestfailed", lambda request: failed.append(request.url))
    fresh.goto("/")
    expect(fresh.get_by_role("heading", name="Pads")).to_be_visible()
    assert fresh.title() == "Scratchpad"
    assert not failed
