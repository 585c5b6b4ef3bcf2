"""The Vault page in a real browser, reached through the app's router (`#/vault`), against a
real server whose probe is a script: it lists connections by name (never a value), adds one
through the probe in a side panel, edits one keeping its secret, tests one and removes one
after asking."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from scratchpad.config import Settings
from scratchpad.vault import KEEP, Vault
from tests.web.conftest import WebServer, screenshot
from tests.web.pending import open_form
from tests.web.probing import (
    CELL,
    STATUS,
    SUCCESS,
    TOKEN,
    ProbeServer,
    labelled_form,
    probe_server,
)

SECRET = "vault-page-secret-4f1c9e"
BASE = "https://api.example.com"


@pytest.fixture(scope="module")
def probing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProbeServer]:
    with probe_server(tmp_path_factory) as found:
        headers = {"Authorization": f"Bearer {found.server.key}"}
        with httpx.Client(base_url=found.server.url, headers=headers, timeout=60) as client:
            assert client.post("/scratchpad/start", json={"name": "main"}).status_code == 200
        yield found


@pytest.fixture(scope="module")
def web_server(probing: ProbeServer) -> WebServer:
    return probing.server


@pytest.fixture
def api(probing: ProbeServer) -> Iterator[httpx.Client]:
    server = probing.server
    headers = {"Authorization": f"Bearer {server.key}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
        yield client


def saved(api: httpx.Client, name: str, **fields: str) -> None:
    body = {"engine": "http-api-key", "name": name, "fields": {"base_url": BASE, **fields}}
    answer = api.post("/v1/datasources", json=body)
    assert answer.status_code == 200, answer.text


def open_vault(page: Page) -> Locator:
    """The app's start page, then the Vault link of the top bar."""
    page.goto("/")
    expect(page.locator(".pads-page")).to_be_visible()
    page.get_by_role("navigation", name="main").get_by_role("link", name="Vault").click()
    expect(page).to_have_url(re.compile(r"/#/vault$"))
    return shown(page)


def shown(page: Page) -> Locator:
    """The Vault page, alone in the app's main area (the pads list is gone)."""
    vault = page.locator("#app > .vt-page")
    expect(vault.locator("h1")).to_have_text("Vault")
    expect(page.locator(".pads-page, .pads")).to_have_count(0)
    expect(page.locator("#app > *")).to_have_count(1)
    expect(page.locator("[data-nav='vault']")).to_have_attribute("aria-current", "page")
    expect(page.locator("[data-nav='pads']")).not_to_have_attribute("aria-current", "page")
    expect(vault.locator(".vt-drawer")).to_have_css("position", "fixed")  # vault.css loaded
    return vault


def drawer(page: Page) -> Locator:
    return page.locator("dialog.vt-drawer")


def assert_side_panel(page: Page) -> None:
    """The side panel is open, modal (a backdrop over the page), against the right-hand edge
    and the whole height of the window."""
    panel = drawer(page)
    expect(panel).to_be_visible()
    assert panel.evaluate("d => d.open && d.matches(':modal')")
    panel.evaluate("d => Promise.all(d.getAnimations().map((a) => a.finished))")  # slid in
    backdrop = panel.evaluate("d => getComputedStyle(d, '::backdrop').backgroundColor")
    assert backdrop not in ("rgba(0, 0, 0, 0)", "transparent"), backdrop
    size = page.viewport_size
    box = panel.bounding_box()
    assert size and box
    assert abs(box["x"] + box["width"] - size["width"]) < 1 and box["y"] == 0
    assert abs(box["height"] - size["height"]) < 1
    assert box["width"] == min(size["width"], 512), box  # 32rem, or all of a narrow window


def card(page: Page, name: str) -> Locator:
    return page.locator(f".vt-card[data-connection='http-api-key/{name}']")


def test_a_connection_is_listed_by_name_never_by_value(page: Page, api: httpx.Client) -> None:
    saved(api, "listed", api_key=SECRET, header="X-Api-Key")
    open_vault(page)
    entry = card(page, "listed")
    expect(entry.locator(".vt-name")).to_have_text("listed")
    expect(entry.locator(".vt-field code")).to_have_text(["base_url", "api_key", "header"])
    expect(entry.locator(".vt-field").nth(1)).to_contain_text("•••• stored")
    expect(entry.locator(".vt-field").nth(0)).not_to_contain_text("stored")
    expect(entry.locator(".vt-pads")).to_have_text("Pads: main")
    expect(entry.locator(".vt-env code").first).to_have_text("DS_HTTP_API_KEY_LISTED__BASE_URL")
    html = page.content()
    for value in (SECRET, KEEP, BASE, "X-Api-Key"):
        assert value not in html
    page.mouse.move(640, 700)  # no hover on the nav link
    screenshot(page, "vault")
    page.get_by_role("link", name="Pads").click()  # the router unmounts the page
    expect(page.locator(".pads-page")).to_be_visible()
    expect(page.locator(".vt-page")).to_have_count(0)


def test_the_vault_address_opens_the_vault_page_alone(page: Page) -> None:
    page.goto("/#/vault")
    shown(page)
    assert page.title() == "Scratchpad"
    page.reload()
    shown(page)


def test_add_opens_a_side_panel_that_closes(page: Page) -> None:
    open_vault(page)
    page.locator("[data-action='add']").click()
    assert_side_panel(page)
    picks = drawer(page).locator(".vt-engine-pick")
    expect(picks.first).to_be_visible()
    expect(drawer(page).locator("h2")).to_have_text("Add a connection")
    assert picks.count() > 3
    screenshot(page, "vault-add")
    page.keyboard.press("Escape")
    expect(drawer(page)).to_be_hidden()

    page.locator("[data-action='add']").click()
    drawer(page).locator(".vt-engine-pick[data-engine='http-api-key']").click()
    form = drawer(page).locator(".fp-panel")
    expect(form.locator(".fp-title")).to_have_text("Connect to HTTP API (API key)")
    assert_side_panel(page)
    form.locator(".fp-close").click()
    expect(drawer(page)).to_be_hidden()
    expect(page.locator(".fp-panel")).to_have_count(0)

    page.locator("[data-action='add']").click()
    expect(picks.first).to_be_visible()
    page.mouse.click(100, 400)  # the backdrop, over the page at the left
    expect(drawer(page)).to_be_hidden()

    page.set_viewport_size({"width": 390, "height": 780})
    page.locator("[data-action='add']").click()
    drawer(page).locator(".vt-engine-pick[data-engine='http-api-key']").click()
    expect(form.locator(".fp-title")).to_be_visible()
    assert_side_panel(page)
    screenshot(page, "vault-form-narrow")


def test_edit_keeps_the_secret_left_empty(
    page: Page, api: httpx.Client, probing: ProbeServer
) -> None:
    saved(api, "edited", api_key=SECRET, header="Authorization")
    open_vault(page)
    card(page, "edited").locator("[data-action='edit']").click()
    panel = drawer(page).locator(".fp-panel")
    expect(panel.locator(".fp-title")).to_have_text("Edit http-api-key/edited")
    assert_side_panel(page)
    expect(panel.locator("[name='base_url']")).to_have_value(BASE)
    secret = panel.locator("[name='api_key']")
    expect(secret).to_have_value("")
    expect(secret).to_have_attribute("type", "password")
    expect(secret).to_have_attribute("placeholder", "•••• stored")
    expect(panel.locator(".fp-field[data-field='api_key'] .fp-msg-help")).to_have_text(
        "Leave empty to keep the stored value."
    )
    assert SECRET not in page.content() and KEEP not in page.content()
    panel.locator("[name='header']").fill("X-Api-Key")
    panel.locator("[data-action='submit']").click()
    expect(panel.locator(".fp-success-title")).to_have_text("Saved")
    vault = Vault(Settings(home=probing.server.home))
    assert vault.load("http-api-key", "edited") == {
        "base_url": BASE, "api_key": SECRET, "header": "X-Api-Key"
    }  # fmt: skip

    panel.locator("[data-action='close']").click()
    expect(drawer(page)).to_be_hidden()

    card(page, "edited").locator("[data-action='edit']").click()  # a secret too short: refused
    panel.locator("[name='api_key']").fill("abc")
    panel.locator("[data-action='submit']").click()
    expect(panel.locator(".fp-banner-error")).to_contain_text("at least 6")
    assert vault.load("http-api-key", "edited")["api_key"] == SECRET


def test_test_probes_the_saved_connection(
    page: Page, api: httpx.Client, probing: ProbeServer
) -> None:
    saved(api, "tested", api_key=TOKEN)
    probing.plays(STATUS, CELL, SUCCESS)
    open_vault(page)
    entry = card(page, "tested")
    entry.locator("[data-action='test']").click()
    outcome = entry.locator(".vt-outcome")
    expect(outcome).to_have_attribute("data-status", "success", timeout=60_000)
    expect(outcome).to_contain_text("Still works: http-api-key/tested")
    assert TOKEN not in page.content()


def test_a_connection_is_added_through_the_probe(
    page: Page, api: httpx.Client, probing: ProbeServer
) -> None:
    before = {d["name"] for d in api.get("/v1/datasources").json()["datasources"]}
    probing.plays(STATUS, CELL, SUCCESS)
    open_vault(page)
    page.locator("[data-action='add']").click()
    page.locator(".vt-engine-pick[data-engine='http-api-key']").click()
    panel = drawer(page).locator(".fp-panel")
    expect(panel.locator(".fp-title")).to_have_text("Connect to HTTP API (API key)")
    expect(panel.locator(".fp-logo svg")).to_have_attribute("data-icon", "key")
    panel.locator("[name='base_url']").fill(probing.service)
    panel.locator("[name='api_key']").fill(TOKEN)
    probing.gate.hold()
    try:
        panel.locator("[data-action='submit']").click()
        assert probing.gate.waiting.wait(60), "the probe never called the service"
        expect(panel.locator(".fp-toast-text")).to_have_text("Calling the service")
        expect(panel.locator(".fp-step")).to_have_text(["Call GET /me"])
        page.keyboard.press("Escape")  # not while the probe runs
        page.mouse.click(100, 400)
        assert_side_panel(page)
        screenshot(page, "form")  # the README's picture
    finally:
        probing.gate.release()
    expect(panel.locator(".fp-success")).to_contain_text("The service answered as alice.")
    after = {d["name"] for d in api.get("/v1/datasources").json()["datasources"]}
    (new,) = after - before
    expect(card(page, new)).to_be_visible()  # the list reloaded
    panel.locator("[data-action='view_connections']").click()
    expect(drawer(page)).to_be_hidden()
    expect(page.locator(".fp-panel")).to_have_count(0)
    assert TOKEN not in page.content()


def test_remove_asks_first(page: Page, api: httpx.Client) -> None:
    saved(api, "removed", api_key=SECRET)
    open_vault(page)
    entry = card(page, "removed")
    entry.locator("[data-action='remove']").click()
    expect(entry.locator(".vt-confirm")).to_contain_text("Remove http-api-key/removed?")
    entry.locator("[data-action='keep']").click()
    expect(entry.locator(".vt-confirm")).to_have_count(0)
    assert api.get("/v1/datasources/http-api-key/removed").status_code == 200
    entry.locator("[data-action='remove']").click()
    entry.locator("[data-action='confirm-remove']").click()
    expect(card(page, "removed")).to_have_count(0)
    expect(page.locator(".vt-message")).to_have_text("Removed http-api-key/removed.")
    assert api.get("/v1/datasources/http-api-key/removed").status_code == 404


def test_one_request_tells_which_pads_get_what(page: Page, api: httpx.Client) -> None:
    for pad in ("second", "third"):
        assert api.post("/scratchpad/start", json={"name": pad}).status_code == 200
    saved(api, "shared", api_key=SECRET)
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    open_vault(page)
    expect(card(page, "shared").locator(".vt-pads")).to_have_text("Pads: main, second, third")
    grants = [url for url in asked if "grants" in url]
    assert grants == [f"{api.base_url}/v1/grants"], grants


def test_cards_fit_a_phone(page: Page, api: httpx.Client) -> None:
    saved(api, "warehouse-reporting-readonly", api_key=SECRET, header="X-Warehouse-Token")
    page.set_viewport_size({"width": 390, "height": 780})
    open_vault(page)
    entry = card(page, "warehouse-reporting-readonly")
    expect(entry).to_be_visible()
    wide = page.evaluate(
        """() => [...document.querySelectorAll('.vt-card, .vt-card *')]
            .filter((e) => e.getBoundingClientRect().right > innerWidth + 0.5)
            .map((e) => e.className || e.tagName)"""
    )
    assert wide == [], wide
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    entry.scroll_into_view_if_needed()
    for action in ("test", "edit", "remove"):
        expect(entry.locator(f"[data-action='{action}']")).to_be_in_viewport(ratio=1)
    screenshot(page, "vault-phone")


def test_forms_a_model_asked_for_are_listed_and_open(page: Page, probing: ProbeServer) -> None:
    _, form_id = open_form(probing.server, labelled_form(title="Connect the billing API"))
    open_vault(page)
    waiting = page.locator(f".vt-waiting .vt-form[data-form='{form_id}']")
    expect(waiting.locator(".vt-form-title")).to_have_text("Connect the billing API")
    expect(page.locator(".vt-waiting h2")).to_contain_text("for you")
    screenshot(page, "vault-waiting")
    waiting.get_by_role("link", name="Open").click()
    expect(page).to_have_url(f"{probing.server.url}/connect/{form_id}")
    expect(page.locator(".cn-page .fp-panel .fp-title")).to_have_text("Connect the billing API")
