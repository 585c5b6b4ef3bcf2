"""The Vault page in a real browser, against a real server whose probe is a script: it lists
connections by name (never a value), adds one through the probe, edits one keeping its secret,
tests one and removes one after asking."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from scratchpad.config import Settings
from scratchpad.vault import KEEP, Vault
from tests.web.conftest import WebServer, screenshot
from tests.web.probing import CELL, STATUS, SUCCESS, TOKEN, ProbeServer, probe_server

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
    page.goto("/")
    page.evaluate(
        """async () => {
            const { mount } = await import("/static/vault.js");
            const box = document.createElement("div");
            box.id = "vault-test";
            document.body.append(box);
            window.unmountVault = mount(box);
        }"""
    )
    expect(page.locator(".vt-page h1")).to_have_text("Vault")
    expect(page.locator(".vt-page")).to_have_css("max-width", "896px")  # vault.css loaded
    return page.locator(".vt-page")


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
    screenshot(page, "vault")
    page.evaluate("window.unmountVault()")
    expect(page.locator(".vt-page")).to_have_count(0)


def test_edit_keeps_the_secret_left_empty(
    page: Page, api: httpx.Client, probing: ProbeServer
) -> None:
    saved(api, "edited", api_key=SECRET, header="Authorization")
    open_vault(page)
    card(page, "edited").locator("[data-action='edit']").click()
    panel = page.locator(".vt-editor .fp-panel")
    expect(panel.locator(".fp-title")).to_have_text("Edit http-api-key/edited")
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

    card(page, "edited").locator("[data-action='edit']").click()  # a secret too short: refused
    page.locator(".vt-editor [name='api_key']").fill("abc")
    page.locator(".vt-editor [data-action='submit']").click()
    expect(page.locator(".vt-editor .fp-banner-error")).to_contain_text("at least 6")
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
    panel = page.locator(".vt-editor .fp-panel")
    expect(panel.locator(".fp-title")).to_have_text("Connect to HTTP API (API key)")
    expect(panel.locator(".fp-logo svg")).to_have_attribute("data-icon", "key")
    panel.locator("[name='base_url']").fill(probing.service)
    panel.locator("[name='api_key']").fill(TOKEN)
    panel.locator("[data-action='submit']").click()
    expect(panel.locator(".fp-success")).to_contain_text("The service answered as alice.")
    after = {d["name"] for d in api.get("/v1/datasources").json()["datasources"]}
    (new,) = after - before
    expect(card(page, new)).to_be_visible()  # the list reloaded
    panel.locator("[data-action='view_connections']").click()
    expect(page.locator(".vt-editor .fp-panel")).to_have_count(0)
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
