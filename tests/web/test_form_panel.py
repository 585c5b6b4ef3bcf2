"""The credential form panel as a component, in a real browser: the patch dialect merged as in
Python, blocks found in text split anywhere, multi-method forms, the status toast, hostile
text, a submission the server refuses. The panel is mounted on a blank page of the server's
origin (one empty container, the UI's CSP); whole flows through the probe are tested where a
person meets them: the `/connect/{form_id}` page (test_connect_page.py) and the Vault page's
side panel (test_vault_page.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from scratchpad.vault.forms import find_blocks, patch_block
from tests.web.conftest import WebServer
from tests.web.probing import ProbeServer, labelled_form, probe_server

VECTORS = json.loads(
    (Path(__file__).parent.parent / "data" / "form_patch_vectors.json").read_text("utf-8")
)["cases"]
FORM = labelled_form(form_id="fm_test0001", subtitle="A key for GET /me.")


@pytest.fixture(scope="module")
def probing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProbeServer]:
    """A server whose probe model is a script (a submission is checked before it is refused,
    and the model's setting first of all)."""
    with probe_server(tmp_path_factory) as found:
        yield found


@pytest.fixture(scope="module")
def web_server(probing: ProbeServer) -> WebServer:
    return probing.server


HARNESS = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>FormPanel</title>
<link rel="stylesheet" href="/static/style.css"></head>
<body><main id="harness"></main></body></html>"""
CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:"


def blank(page: Page) -> None:
    """A blank page at the server's origin (so the UI's modules load from the server): one
    empty container and the UI's CSP, nothing else of the app."""
    page.route(
        "**/harness.html",
        lambda route: route.fulfill(
            status=200, content_type="text/html", body=HARNESS,
            headers={"Content-Security-Policy": CSP},
        ),
    )  # fmt: skip
    page.goto("/harness.html")
    expect(page.locator("body > *")).to_have_count(1)


def open_panel(page: Page, spec: dict[str, Any]) -> None:
    """A FormPanel in the blank page's container, as `window.panel`."""
    blank(page)
    page.evaluate(
        """async (spec) => {
            const { FormPanel } = await import("/static/form/panel.js");
            window.panel = new FormPanel(document.getElementById("harness"));
            window.panel.setForm(spec);
        }""",
        spec,
    )
    expect(page.locator("#harness > .fp-panel .fp-title")).to_have_text(spec["title"])
    expect(page.locator(".fp-panel")).to_have_css("border-radius", "10px")  # form.css loaded


def test_the_form_modules_use_the_one_dom_helper_module(page: Page) -> None:
    loaded: list[str] = []
    page.on("request", lambda request: loaded.append(request.url.split("/static/", 1)[-1]))
    blank(page)
    checks = page.evaluate(
        """async () => {
            await import("/static/form/panel.js");
            await import("/static/vault.js");
            const { h, outLink } = await import("/static/dom.js");
            let refused = false;
            try { h("div", { style: "color: red" }); } catch { refused = true; }
            return [refused, outLink("javascript:alert(1)", "x"), outLink("https://a.b/", "x").rel];
        }"""
    )
    assert checks == [True, None, "noopener noreferrer"]
    assert "dom.js" in loaded and "form/dom.js" not in loaded
    assert page.request.get("/static/form/dom.js").status == 404  # no second copy


def fill(page: Page, values: dict[str, str]) -> None:
    for name, value in values.items():
        page.locator(f".fp-field[data-field='{name}'] .fp-input").fill(value)


def test_the_patch_vectors_merge_in_the_browser_as_in_python(page: Page) -> None:
    blank(page)
    results = page.evaluate(
        """async (cases) => {
            const { mergePatch } = await import("/static/form/patch.js");
            return cases.map(({ name, form, patch }) => {
                const before = JSON.stringify([form, patch]);
                const merged = mergePatch(form, patch);
                return { name, merged, untouched: JSON.stringify([form, patch]) === before };
            });
        }""",
        VECTORS,
    )
    assert len(results) == len(VECTORS) == 61
    for case, result in zip(VECTORS, results, strict=True):
        assert result["name"] == case["name"]
        assert result["merged"] == case["expected"], case["name"]  # dicts: key order ignored
        assert result["untouched"], case["name"]


def test_blocks_are_found_in_text_split_anywhere(page: Page) -> None:
    patch = patch_block({"form_id": "fm_x", "status_text": "Trying `psql`…", "fields": {"a": None}})
    text = (
        "Testing the connection…\n"
        f"{patch}\n"
        "Some prose, then code that is not ours:\n```python\nprint('```data-vault-form')\n```\n"
        f"  {patch_block({'form_id': 'fm_x', '_is_probing': False})}\n"
        "Done."
    )
    expected = [body for _, body in find_blocks(text)]
    assert len(expected) == 2
    blank(page)
    results = page.evaluate(
        """async (text) => {
            const { BlockReader } = await import("/static/form/blocks.js");
            const read = (pieces) => {
                const reader = new BlockReader();
                let prose = "";
                const blocks = [];
                for (const out of [...pieces.map((p) => reader.feed(p)), reader.end()]) {
                    prose += out.prose;
                    blocks.push(...out.blocks.map((b) => b.body));
                }
                return { prose, blocks };
            };
            const whole = read([text]);
            const splits = [];
            for (let i = 0; i <= text.length; i++) {
                for (const j of [i, i + 1, i + 7]) {
                    const got = read([text.slice(0, i), text.slice(i, j), text.slice(j)]);
                    if (JSON.stringify(got) !== JSON.stringify(whole)) splits.push([i, j]);
                }
            }
            return { whole, splits, chars: read([...text]) };
        }""",
        text,
    )
    assert results["whole"]["blocks"] == expected
    assert results["splits"] == [] and results["chars"] == results["whole"]
    prose = results["whole"]["prose"]
    assert prose.startswith("Testing the connection…\n") and prose.endswith("Done.")
    assert "print('```data-vault-form')" in prose and "fm_x" not in prose


METHODS_FORM = {
    "form_id": "fm_methods01",
    "engine": "mail",
    "title": "Connect mail",
    "logo": "cloud",
    "fields": [{"name": "email", "label": "Email", "type": "text", "required": True}],
    "methods": [
        {
            "id": "app_password",
            "label": "App password",
            "description": "A 16-character key.",
            "recommended": True,
            "help_url": "https://example.com/app-passwords",
            "fields": [{"name": "app_password", "label": "App password", "type": "password"}],
        },
        {
            "id": "service_account",
            "label": "Service account",
            "description": "Workspace only.",
            "fields": [
                {"name": "key_json", "label": "JSON key", "type": "textarea"},
                {"name": "delegated", "label": "Delegated", "type": "boolean",
                 "checkbox_label": "Domain-wide delegation"},
                {"name": "scope", "label": "Scope", "type": "select",
                 "options": [{"value": "read", "label": "Read"}, {"value": "all", "label": "All"}]},
            ],
        },
    ],
}  # fmt: skip


def test_a_multi_method_form_keeps_typed_values_per_method(page: Page) -> None:
    open_panel(page, METHODS_FORM)
    panel = page.locator(".fp-panel")
    cards = panel.locator(".fp-method-pick")
    expect(cards).to_have_count(2)
    expect(cards.nth(0).locator(".fp-pill")).to_have_text("Recommended")
    expect(cards.nth(1).locator(".fp-pill")).to_have_count(0)
    expect(panel.locator(".fp-method-help")).to_have_attribute(
        "href", "https://example.com/app-passwords"
    )
    expect(panel.locator(".fp-field")).to_have_count(0)  # a method first
    cards.nth(0).click()
    expect(panel.locator(".fp-crumb-method")).to_have_text("App password")
    fill(page, {"email": "a@example.com", "app_password": "abcd-efgh-ijkl"})
    panel.locator(".fp-change").click()
    panel.locator(".fp-method-pick[data-method='service_account']").click()
    expect(panel.locator(".fp-crumb-method")).to_have_text("Service account")
    expect(panel.locator("[name='email']")).to_have_value("a@example.com")  # shared
    expect(panel.locator("textarea[name='key_json']")).to_have_value("")
    expect(panel.locator(".fp-check-label")).to_have_text("Domain-wide delegation")
    panel.locator("[name='key_json']").fill('{"type": "service_account"}')
    panel.locator("[name='delegated']").check()
    panel.locator("[name='scope']").select_option("all")
    panel.locator(".fp-field[data-field='email'] .fp-skip").click()
    expect(panel.locator("[name='email']")).to_be_disabled()
    submission = page.evaluate("window.panel.collect()")
    assert submission["values"] == {
        "key_json": '{"type": "service_account"}', "delegated": "true", "scope": "all"
    }  # fmt: skip
    assert submission["skipped"] == ["email"]
    assert submission["form_spec"]["auth_method"] == "service_account"
    panel.locator(".fp-change").click()
    panel.locator(".fp-method-pick[data-method='app_password']").click()
    expect(panel.locator("[name='app_password']")).to_have_value("abcd-efgh-ijkl")
    stored = page.evaluate("[localStorage.length, Object.keys(sessionStorage)]")
    assert stored == [0, ["scratchpad.session"]]  # the tab's session only, never a value


def test_the_status_toast_dismisses_and_a_new_status_brings_it_back(page: Page) -> None:
    open_panel(page, FORM)
    toast = page.locator(".fp-toast")
    expect(toast).to_have_count(0)
    page.evaluate("window.panel.applyPatch({form_id: 'fm_test0001', status_text: 'Step one'})")
    expect(toast).to_have_text("Step one×")
    toast.locator(".fp-toast-close").click()
    expect(toast).to_have_count(0)
    page.evaluate("window.panel.applyPatch({form_id: 'fm_test0001', subtitle: 'Other'})")
    expect(toast).to_have_count(0)  # the same status stays dismissed
    page.evaluate("window.panel.applyPatch({form_id: 'fm_test0001', status_text: 'Step two'})")
    expect(toast.locator(".fp-toast-text")).to_have_text("Step two")
    page.evaluate(
        "window.panel.applyPatch({form_id: 'fm_test0001', fields: {api_key: "
        "{status: 'Validating…', warning: 'Looks short'}}})"
    )
    field = page.locator(".fp-field[data-field='api_key']")
    expect(field.locator(".fp-msg-status")).to_have_text("Validating…")
    expect(field.locator(".fp-msg-warning")).to_have_text("Looks short")
    assert page.locator("[style]").count() == 0  # CSP: no inline styles anywhere


def test_hostile_form_text_stays_text(page: Page) -> None:
    hostile = {
        **FORM,
        "title": "<img src=x onerror=window.pwned=1>",
        "subtitle": "<script>window.pwned=2</script>",
        "help_url": "javascript:window.pwned=3",
        "logo": "../../etc/passwd",
        "logo_color": "red; background: url(https://example.com/x)",
        "form_error": "<b>bold</b>",
    }
    open_panel(page, hostile)
    panel = page.locator(".fp-panel")
    expect(panel.locator(".fp-banner-error")).to_have_text("<b>bold</b>")
    assert panel.locator("img, script, b, a").count() == 0
    expect(panel.locator(".fp-logo svg")).to_have_attribute("data-icon", "key")
    polluted = page.evaluate(
        """async () => {
            const { mergePatch } = await import("/static/form/patch.js");
            const patch = JSON.parse('{"__proto__": {"polluted": 1}, "fields": {"__proto__": {}}}');
            const merged = mergePatch({ form_id: "f" }, patch);
            return [({}).polluted, Object.getPrototypeOf(merged) === Object.prototype,
                    merged.fields.map((f) => f.name)];
        }"""
    )
    assert polluted == [None, True, ["__proto__"]]
    assert page.evaluate("window.pwned") is None


def test_a_refused_submission_shows_the_servers_message(page: Page) -> None:
    open_panel(page, {**FORM, "engine": "not an engine!"})
    page.locator(".fp-panel [data-action='submit']").click()
    banner = page.locator(".fp-panel .fp-banner-error")
    expect(banner).to_contain_text("form_spec: engine")
    expect(page.locator(".fp-panel [name='api_key']")).to_be_enabled()
