"""The pad page's "Revert last cell" button, in a real browser against a real server: the
variables go back, the cells stay, and a revert with nothing to undo says why."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.web.test_notebook import finished, open_pad, run


def test_revert_last_cell_puts_the_variables_back(page: Page) -> None:
    open_pad(page, "reverting")
    finished(run(page, "a = [1]"))
    finished(run(page, "a.append(2)"))
    page.get_by_role("button", name="Revert last cell").click()
    expect(page.locator(".notice")).to_contain_text("as they were after cell 1")
    expect(page.locator(".cell")).to_have_count(2)  # the cells stay
    expect(finished(run(page, "a + ['x']"))).to_contain_text("[1, 'x']")
    page.get_by_role("button", name="Revert last cell").click()
    expect(page.locator(".notice.bad")).to_contain_text("nothing to revert")
