"""``/connect/{form_id}`` end to end: a model asks for credentials over MCP (a client without
URL elicitation gets the link at once), a person opens the link and fills the form in a real
browser, a scripted probe tests what was typed against a real service, and the model asks
again and is told the variable names. Also: a failure's banner, a field to fix then a field
to add, and a form that cannot be opened."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.web.conftest import API_STATUS, WebServer, screenshot
from tests.web.pending import open_form, request_credentials
from tests.web.probing import (
    CELL,
    FAILURE,
    STATUS,
    SUCCESS,
    TOKEN,
    ProbeServer,
    call,
    labelled_form,
    probe_server,
)

DONE = "You can close this tab; the agent has been told."
FORM = labelled_form(subtitle="A key for GET /me, to read the service's users.")


@pytest.fixture(scope="module")
def probing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProbeServer]:
    with probe_server(tmp_path_factory) as found:
        yield found


@pytest.fixture(scope="module")
def web_server(probing: ProbeServer) -> WebServer:
    return probing.server


@pytest.fixture
def person(browser: Browser, web_server: WebServer) -> Iterator[Page]:
    """A person's browser: no key, no session; what the form's one-time link gives it."""
    context = browser.new_context(base_url=web_server.url, viewport={"width": 1280, "height": 800})
    yield context.new_page()
    context.close()


def form_of(server: WebServer, form_id: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {server.key}"}
    answer = httpx.get(f"{server.url}/v1/forms/{form_id}", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def opened(page: Page, probing: ProbeServer, spec: dict[str, Any] = FORM) -> str:
    """A new pending form, its link opened in ``page``: the form's id."""
    link, form_id = open_form(probing.server, spec)
    page.goto(link)
    expect(page).to_have_url(f"{probing.server.url}/connect/{form_id}")
    expect(page.locator(".cn-page .fp-panel .fp-title")).to_have_text(spec["title"])
    return form_id


@pytest.fixture
def console(person: Page) -> list[str]:
    """Every console message and page error of the person's page."""
    seen: list[str] = []
    person.on("console", lambda message: seen.append(message.text))
    person.on("pageerror", lambda error: seen.append(str(error)))
    return seen


def assert_nowhere(page: Page, console: list[str], *values: str) -> None:
    """No value in the page's markup, its inputs or text, or the console."""
    html = page.content()
    inputs = page.eval_on_selector_all("input, textarea, select", "els => els.map(e => e.value)")
    text = page.locator("body").inner_text()
    for value in values:
        assert value not in html and value not in text
        assert all(value not in found for found in inputs)
        assert all(value not in message for message in console)


def fill(page: Page, values: dict[str, str]) -> None:
    for name, value in values.items():
        page.locator(f".fp-field[data-field='{name}'] .fp-input").fill(value)


def test_a_requested_form_is_filled_on_its_page_and_the_model_gets_the_names(
    person: Page, probing: ProbeServer, console: list[str]
) -> None:
    page = person
    probing.plays(STATUS, CELL, SUCCESS)
    form_id = opened(page, probing)
    assert page.evaluate(API_STATUS, "/v1/pads") == 403  # this form only: the app is out of reach
    assert "still open" in request_credentials(probing.server, {"form_id": form_id})
    panel = page.locator(".fp-panel")
    expect(page.locator(".topbar, #app, .pads")).to_have_count(0)  # a page of its own
    box, width = panel.bounding_box(), page.viewport_size
    assert box and width and abs(box["x"] + box["width"] / 2 - width["width"] / 2) < 2  # centred
    expect(panel.locator(".fp-subtitle")).to_have_text(FORM["subtitle"])
    fill(page, {"base_url": probing.service, "api_key": TOKEN})
    probing.gate.hold()
    try:
        panel.locator("[data-action='submit']").click()
        assert probing.gate.waiting.wait(60), "the probe never called the service"
        expect(panel.locator(".fp-toast-text")).to_have_text("Calling the service")
        expect(panel.locator("[name='api_key']")).to_be_disabled()
        expect(panel.locator(".fp-step")).to_have_text(["Call GET /me"])
        screenshot(page, "connect-probe")
    finally:
        probing.gate.release()
    expect(panel.locator(".fp-success")).to_contain_text("The service answered as alice.")
    expect(panel.locator(".fp-actions button")).to_have_text(["Close"])  # nothing elsewhere
    expect(page.locator("[data-action='view_connections']")).to_have_count(0)
    expect(page.locator(".cn-done")).to_have_text(DONE)
    screenshot(page, "connect-done")
    variables = form_of(probing.server, form_id)["connection"]["variables"]
    assert variables and all(name.startswith("DS_HTTP_API_KEY_") for name in variables)
    told = request_credentials(probing.server, {"form_id": form_id})
    assert all(name in told for name in variables), told
    assert TOKEN not in told
    assert_nowhere(page, console, TOKEN, probing.service)

    panel.locator("[data-action='close']").click()
    expect(page.locator(".cn-notice h1")).to_have_text("Connected")
    expect(page.locator(".cn-notice")).to_contain_text(DONE)
    expect(page.locator(".cn-connection")).to_contain_text("Saved as http-api-key/")
    page.reload()  # the form is done: it cannot be sent again
    expect(page.locator(".cn-notice h1")).to_have_text("This form is done")
    expect(page.locator(".fp-panel")).to_have_count(0)


def test_a_connection_named_in_the_form_is_saved_under_that_name(
    person: Page, probing: ProbeServer
) -> None:
    page = person
    probing.plays(CELL, SUCCESS)
    form_id = opened(page, probing)
    panel = page.locator(".fp-panel")
    named = panel.locator(".fp-field[data-field='connection_name'] .fp-input")
    expect(named).to_have_attribute("placeholder", "the next number")  # optional
    fill(page, {"base_url": probing.service, "api_key": TOKEN, "connection_name": "a/b"})
    panel.locator("[data-action='submit']").click()
    expect(panel.locator(".fp-banner-error")).to_contain_text("invalid connection name 'a/b'")
    fill(page, {"connection_name": "billing"})
    panel.locator("[data-action='submit']").click()
    expect(panel.locator(".fp-success")).to_contain_text("The service answered as alice.")
    connection = form_of(probing.server, form_id)["connection"]
    assert connection["name"] == "billing"
    assert "DS_HTTP_API_KEY_BILLING__API_KEY" in connection["variables"]


def test_a_failure_shows_its_banner_over_the_restored_grid(
    person: Page, probing: ProbeServer
) -> None:
    page = person
    probing.plays(CELL, FAILURE)
    opened(page, probing)
    panel = page.locator(".fp-panel")
    fill(page, {"base_url": probing.service, "api_key": "wrong-key-123"})
    panel.locator("[data-action='submit']").click()
    expect(panel.locator(".fp-banner-error")).to_have_text("The service refused the key.")
    expect(panel.locator(".fp-banner-warning")).to_have_text("Check the key and retry.")
    for name in ("base_url", "api_key"):
        expect(panel.locator(f"[name='{name}']")).to_be_enabled()
    expect(panel.locator("[name='api_key']")).to_have_value("wrong-key-123")  # kept to edit
    expect(panel.locator(".fp-step")).to_have_class("fp-step fp-step-ok")
    expect(page.locator(".cn-done")).to_have_count(0)
    assert "wrong-key-123" not in page.content()
    page.set_viewport_size({"width": 390, "height": 780})
    screenshot(page, "connect-failed-narrow")
    box = panel.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390


def test_a_field_to_fix_then_a_field_to_add_then_success(
    person: Page, probing: ProbeServer
) -> None:
    page = person
    form_id = opened(page, probing)
    panel = page.locator(".fp-panel")
    fill(page, {"base_url": probing.service})
    panel.locator("[data-action='submit']").click()  # api_key empty: the shape check says so
    api_key = panel.locator(".fp-field[data-field='api_key']")
    expect(api_key.locator(".fp-msg-error")).to_contain_text("required")
    expect(api_key).to_have_class("fp-field fp-has-error")
    expect(panel.locator(".fp-banner-error")).to_contain_text("need fixing")

    extra = {"name": "workspace", "label": "Workspace", "type": "text", "required": True}
    probing.plays(CELL, call("request_extra_field", fields=[extra], reason="Which workspace?"))
    fill(page, {"api_key": TOKEN})
    panel.locator("[data-action='submit']").click()
    expect(panel.locator(".fp-subtitle")).to_have_text("Which workspace?")
    expect(api_key.locator(".fp-msg-error")).to_have_count(0)  # cleared by the new round
    workspace = panel.locator("input[name='workspace']")
    expect(workspace).to_be_enabled()
    expect(panel.locator("[name='api_key']")).to_have_value(TOKEN)  # kept for the next round

    probing.plays(CELL, SUCCESS)
    workspace.fill("analytics")
    panel.locator("[data-action='submit']").click()
    expect(panel.locator(".fp-success")).to_contain_text("The service answered as alice.")
    expect(page.locator(".cn-done")).to_have_text(DONE)
    assert TOKEN not in page.content()
    variables = form_of(probing.server, form_id)["connection"]["variables"]
    assert any(name.endswith("__WORKSPACE") for name in variables), variables


def test_a_form_that_cannot_be_opened_says_so(page: Page) -> None:
    page.goto("/connect/fm_unknown0001")
    notice = page.locator(".cn-notice")
    expect(notice.locator("h1")).to_have_text("This form could not be opened")
    expect(notice.locator("p")).not_to_be_empty()
    expect(page.locator(".fp-panel")).to_have_count(0)
