"""The pads list shows an asleep pad and wakes it, in a real browser against a real server
whose pads sleep after a second idle; a status the page does not know shows as its word."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, Route, expect

from tests.server_helpers import running_server
from tests.web.conftest import WebServer, screenshot
from tests.web.test_notebook import SLOW, execute


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    """The page fixture's server, with pads that sleep after 1 s idle."""
    root = tmp_path_factory.mktemp("web-sleep")
    home, workspace = root / "home", root / "workspace"
    workspace.mkdir()
    key = secrets.token_urlsafe(24)
    env = {"SCRATCHPAD_SLEEP_AFTER_S": "1"}
    with running_server(home, workspace, key, env) as (url, process):
        yield WebServer(url, key, home, workspace, process)


def test_an_asleep_pad_is_listed_asleep_and_its_wake_button_starts_it(
    page: Page, web_server: WebServer
) -> None:
    assert execute(web_server, "dozy", "x = 1")["status"] == "ok"
    page.goto("/")
    row = page.locator("tr[data-pad='dozy']")
    expect(row.locator(".chip")).to_have_text("asleep", timeout=SLOW)
    expect(row.locator(".chip")).to_have_class(re.compile(r"status-asleep"))
    wake = row.get_by_role("button", name="Wake dozy")
    screenshot(page, "pads-asleep")
    wake.click()
    expect(row.locator(".chip")).to_have_text("idle", timeout=SLOW)
    expect(row.get_by_role("button", name="Wake dozy")).to_have_count(0)


def test_a_status_the_page_does_not_know_shows_as_its_word(page: Page) -> None:
    pad = {"name": "future", "status": "hibernating", "cells": 2, "queued": 0}

    def answer(route: Route) -> None:
        route.fulfill(status=200, content_type="application/json", body=json.dumps({"pads": [pad]}))

    page.route("**/v1/pads", answer)
    page.goto("/")
    chip = page.locator("tr[data-pad='future'] .chip")
    expect(chip).to_have_text("hibernating")
    expect(chip).to_have_class(re.compile(r"status-unknown"))
