"""The pads list and the pad's own page show an asleep pad and wake it, in a real browser
against a real server whose pads sleep after a few seconds idle; the first cell after a wake
shows the restore report in its log; a status the page does not know shows as its word."""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, Route, expect

from tests.server_helpers import running_server
from tests.web.conftest import WebServer, screenshot
from tests.web.test_notebook import SLOW, client, execute, finished, open_pad, run


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    """The page fixture's server, with pads that sleep after 2 s idle."""
    root = tmp_path_factory.mktemp("web-sleep")
    home, workspace = root / "home", root / "workspace"
    workspace.mkdir()
    key = secrets.token_urlsafe(24)
    env = {"SCRATCHPAD_SLEEP_AFTER_S": "2"}
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


def asleep_by(server: WebServer, name: str, deadline: float) -> None:
    """Wait until pad ``name`` lists asleep."""
    with client(server) as http:
        while time.monotonic() < deadline:
            pads = http.get("/v1/pads").json()["pads"]
            if any(pad["name"] == name and pad["status"] == "asleep" for pad in pads):
                return
            time.sleep(0.1)
    raise AssertionError(f"pad {name!r} did not fall asleep")


def test_a_status_the_page_does_not_know_shows_as_its_word(page: Page) -> None:
    pad = {"name": "future", "status": "hibernating", "cells": 2, "queued": 0}

    def answer(route: Route) -> None:
        route.fulfill(status=200, content_type="application/json", body=json.dumps({"pads": [pad]}))

    page.route("**/v1/pads", answer)
    page.goto("/")
    chip = page.locator("tr[data-pad='future'] .chip")
    expect(chip).to_have_text("hibernating")
    expect(chip).to_have_class(re.compile(r"status-unknown"))


def test_an_asleep_pad_page_says_so_and_wakes_and_its_first_cell_shows_the_report(
    page: Page, web_server: WebServer
) -> None:
    code = "import socket\nx = 41\ny = [1, 2]\nconn = socket.socket()"
    assert execute(web_server, "napper", code)["status"] == "ok"
    asleep_by(web_server, "napper", time.monotonic() + SLOW / 1000)  # a feed keeps it awake
    open_pad(page, "napper")
    chip = page.locator(".pad-header .chip")
    expect(chip).to_have_text("asleep")
    note = page.locator(".asleep-note")
    expect(note).to_be_visible()
    expect(note).to_contain_text("asleep")
    expect(note).to_contain_text(re.compile(r"last active (just now|\d+ s ago)"))
    screenshot(page, "pad-asleep")
    page.get_by_role("button", name="Wake napper").click()
    expect(chip).not_to_have_text("asleep", timeout=SLOW)  # a kernel again (it may doze off)
    cell = finished(run(page, "x + 1"))
    expect(cell.locator(".result")).to_contain_text("42")
    log = cell.locator(".logs")
    log.locator("summary").click()
    expect(log).to_contain_text("The kernel was asleep")
    expect(log).to_contain_text("saved after cell 1.")
    expect(log).to_contain_text(re.compile(r"Restored: [^.]*\bx\b"))
    expect(log).to_contain_text(re.compile(r"Not restored: conn \("))
