"""The web UI in a real browser against a real server: the pads list, the live notebook
(streamed output, plots, folded errors, sandboxed HTML, cancel, reload mid-cell, cells run by
another client) and the files view. One server for the module; each test its own pad."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from playwright.sync_api import FilePayload, Locator, Page, expect

from tests.web.conftest import WebServer, screenshot

SLOW = 20_000  # ms: a pad's first cell creates its environment


def client(server: WebServer) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.key}"}, timeout=60
    )


def execute(server: WebServer, name: str, code: str) -> dict[str, Any]:
    """Run a cell as another client would (the plain protocol); its recorded cell."""
    with (
        client(server) as http,
        http.stream(
            "POST", "/scratchpad/execute-stream", json={"name": name, "code": code}
        ) as response,
    ):
        for line in response.iter_lines():
            if line.startswith("data: "):
                frame = json.loads(line[6:])
                if frame["type"] == "cell":
                    return dict(frame["cell"])
    raise AssertionError("no cell frame")


def routes(server: WebServer) -> set[str]:
    with client(server) as http:
        return set(http.get("/openapi.json").json()["paths"])


@pytest.fixture(scope="module")
def feed(web_server: WebServer) -> None:
    if "/v1/pads/{name}/events" not in routes(web_server):
        pytest.skip("this server has no pad feed yet (GET /v1/pads/{name}/events)")


@pytest.fixture(scope="module")
def files(web_server: WebServer) -> None:
    if "/v1/pads/{name}/files" not in routes(web_server):
        pytest.skip("this server has no files routes yet (GET /v1/pads/{name}/files)")


def open_pad(page: Page, name: str) -> None:
    page.goto(f"/#/pads/{quote(name, safe='')}")
    expect(page.locator(".pad-header h1")).to_have_text(name)


def run(page: Page, code: str) -> Locator:
    """Type a cell into the editor, Shift-Enter; the new cell on the page."""
    before = page.locator(".cell").count()
    page.locator("#cell-code").fill(code)
    page.locator("#cell-code").press("Shift+Enter")
    expect(page.locator(".cell")).to_have_count(before + 1)
    return page.locator(".cell").nth(before)


def finished(cell: Locator, status: str = "ok") -> Locator:
    expect(cell).to_have_attribute("data-status", status, timeout=SLOW)
    return cell


TICKING = (
    "import time\nfor i in range({n}):\n    print('{tag}', i, flush=True)\n    time.sleep(0.3)"
)


def test_streamed_output_shows_before_the_cell_ends(page: Page) -> None:
    open_pad(page, "stream")
    cell = run(page, TICKING.format(n=12, tag="tick"))
    expect(cell.locator(".stdout")).to_contain_text("tick 1", timeout=SLOW)
    expect(cell).to_have_attribute("data-status", "running")
    expect(cell.locator(".duration")).not_to_be_empty()
    expect(cell.get_by_role("button", name="Cancel")).to_be_visible()
    finished(cell)
    expect(cell.locator(".stdout")).to_contain_text("tick 11")
    assert cell.locator(".stdout").inner_text().count("tick 3\n") == 1


def test_plot_error_and_html_outputs(page: Page) -> None:
    open_pad(page, "outputs")
    plot = run(
        page,
        'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\n'
        "plt.plot([1, 3, 2])\nplt.show()",
    )
    image = finished(plot).locator("img.output-image")
    expect(image).to_have_attribute("src", _starts_with("data:image/png;base64,"))
    assert image.evaluate("img => img.complete && img.naturalWidth > 100")

    error = finished(run(page, "def f():\n    return 1 / 0\nf()"), "error")
    expect(error.locator(".error-line")).to_have_text("ZeroDivisionError: division by zero")
    trace = error.locator("details .traceback")
    expect(trace).to_be_hidden()
    error.locator("summary").click()
    expect(trace).to_contain_text("in f")

    html = run(
        page,
        "class H:\n    def _repr_html_(self):\n        return \"<b id='inner'>bold"
        " move</b><script>parent.document.title = 'owned'</script>\"\ndisplay(H())",
    )
    frame = finished(html).locator("iframe.output-html")
    expect(frame).to_have_attribute("sandbox", "")
    expect(frame.content_frame.locator("#inner")).to_have_text("bold move")
    assert page.locator("#inner").count() == 0
    assert page.title() == "outputs · Scratchpad"


def _starts_with(prefix: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(prefix))


def test_cancel_keeps_the_variables(page: Page) -> None:
    open_pad(page, "cancel")
    finished(run(page, "kept = 41 + 1"))
    long = run(page, "import time\nprint('sleeping', flush=True)\ntime.sleep(60)")
    expect(long.locator(".stdout")).to_contain_text("sleeping", timeout=SLOW)
    long.get_by_role("button", name="Cancel").click()
    finished(long, "cancelled")
    expect(long.locator(".badge")).to_have_text("cancelled")
    after = finished(run(page, "print(kept)"))
    expect(after.locator(".stdout")).to_have_text("42")


def test_reload_mid_cell_shows_what_ran_and_the_rest(page: Page, feed: None) -> None:
    open_pad(page, "reload")
    cell = run(page, TICKING.format(n=14, tag="beat"))
    expect(cell.locator(".stdout")).to_contain_text("beat 2", timeout=SLOW)
    page.reload()
    again = page.locator(".cell").last
    expect(again).to_have_attribute("data-status", "running")
    expect(again.locator(".stdout")).to_contain_text("beat 0")
    finished(again)
    text = again.locator(".stdout").inner_text()
    assert [text.count(f"beat {i}\n") for i in range(14)] == [1] * 14
    expect(page.locator(".cell")).to_have_count(1)


def test_a_cell_from_another_client_shows_up_live(
    page: Page, web_server: WebServer, feed: None
) -> None:
    open_pad(page, "shared")
    finished(run(page, "x = 1"))
    agent = threading.Thread(
        target=execute, args=(web_server, "shared", TICKING.format(n=10, tag="agent"))
    )
    agent.start()
    try:
        cell = page.locator(".cell").nth(1)
        expect(cell.locator(".stdout")).to_contain_text("agent 1", timeout=SLOW)
        expect(cell).to_have_attribute("data-status", "running")
        expect(cell.locator(".code")).to_contain_text("print('agent'")
        finished(cell)
    finally:
        agent.join()
    expect(page.locator(".cell")).to_have_count(2)


def test_a_detached_cell_from_another_client_shows_up_live(
    page: Page, web_server: WebServer, feed: None
) -> None:
    open_pad(page, "detached")
    finished(run(page, "x = 1"))
    with client(web_server) as http:
        code = TICKING.format(n=10, tag="left")
        submitted = http.post("/v1/pads/detached/cells", json={"code": code, "id": "left-1"})
        assert submitted.status_code == 202, submitted.text
    cell = page.locator(".cell").nth(1)
    expect(cell.locator(".stdout")).to_contain_text("left 1", timeout=SLOW)
    expect(cell).to_have_attribute("data-status", "running")
    expect(cell.locator(".code")).to_contain_text("print('left'")
    finished(cell)
    expect(cell.locator(".stdout")).to_contain_text("left 9")
    expect(page.locator(".cell")).to_have_count(2)


def test_each_cell_shows_its_number_in_the_pad(page: Page, feed: None) -> None:
    open_pad(page, "numbered")
    expect(finished(run(page, "1")).locator(".cell-number")).to_have_text("[1]")
    running = run(page, TICKING.format(n=8, tag="n"))
    expect(running.locator(".stdout")).to_contain_text("n 1", timeout=SLOW)
    expect(running.locator(".cell-number")).to_have_text("[2]")  # known before it ends
    finished(running)
    page.reload()
    expect(page.locator(".cell .cell-number")).to_have_text(["[1]", "[2]"], timeout=SLOW)


# A 2x1 PNG, written by a cell: the files view previews it through a signed URL.
PIXELS = (
    "import base64\nopen('dot.png', 'wb').write(base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAI"
    "AAAABCAYAAAD0In+KAAAAEUlEQVR4nGP4z8DwnwGIGQAd+wL+QvaDAwAAAABJRU5ErkJggg=='))"
)


def test_files_upload_preview_download_and_delete(
    page: Page, web_server: WebServer, files: None
) -> None:
    execute(web_server, "filing", "open('seed.txt', 'w').write('seed')\n" + PIXELS)
    page.goto("/#/pads/filing/files")
    expect(page.locator("tr[data-path='seed.txt']")).to_be_visible()
    page.locator("tr[data-path='dot.png']").get_by_role("button", name="Preview").click()
    preview = page.locator("figure.preview img")
    expect(preview).to_have_attribute("src", re.compile(r"/files/dot\.png\?sig="))
    preview.evaluate("img => img.decode()")  # loaded: the signed URL opened it
    assert preview.evaluate("img => img.naturalWidth") == 2
    upload: FilePayload = {
        "name": "notes.txt",
        "mimeType": "text/plain",
        "buffer": "héllo\n".encode(),
    }
    page.locator("#upload").set_input_files([upload])
    row = page.locator("tr[data-path='notes.txt']")
    expect(row).to_be_visible()
    assert execute(web_server, "filing", "open('notes.txt').read()")["result"] == "'héllo\\n'"
    with page.expect_download() as download:
        row.get_by_role("link", name="notes.txt").click()
    assert Path(download.value.path()).read_bytes() == "héllo\n".encode()
    row.get_by_role("button", name="Delete notes.txt").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(row).to_have_count(0)
    expect(page.locator("tr[data-path='seed.txt']")).to_be_visible()


@pytest.mark.parametrize("name", ["saved", "данные"])  # RFC 6266's filename* in a browser
def test_the_notebook_downloads_as_ipynb(page: Page, web_server: WebServer, name: str) -> None:
    execute(web_server, name, "print('kept')")
    open_pad(page, name)
    expect(page.locator(".cell")).to_have_count(1)
    with page.expect_download() as download:
        page.get_by_role("link", name="Download .ipynb").click()
    assert download.value.suggested_filename == f"{name}.ipynb"
    notebook = json.loads(Path(download.value.path()).read_text("utf-8"))
    assert notebook["nbformat"] == 4 and "print('kept')" in json.dumps(notebook["cells"])


def test_remove_asks_first(page: Page, web_server: WebServer) -> None:
    execute(web_server, "doomed", "1")
    open_pad(page, "doomed")
    expect(page.locator(".cell")).to_have_count(1)
    page.get_by_role("button", name="Remove").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("cannot be undone")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    page.get_by_role("button", name="Remove").click()
    page.get_by_role("dialog").get_by_role("button", name="Remove").click()
    expect(page).to_have_url(_starts_with(f"{web_server.url}/#/"))
    expect(page.locator(".pads")).to_be_visible()
    expect(page.locator("tr[data-pad='doomed']")).to_have_count(0)
    with client(web_server) as http:
        assert "doomed" not in [pad["name"] for pad in http.get("/v1/pads").json()["pads"]]


def test_pads_list_and_new_pad(page: Page, web_server: WebServer) -> None:
    execute(web_server, "données/2024", "print('hi')")
    page.goto("/")
    row = page.locator("tr[data-pad='données/2024']")
    expect(row).to_be_visible(timeout=SLOW)
    expect(row.locator(".chip")).to_have_text(_one_of("idle", "stopped"))
    expect(row.locator("td").last).to_have_text("1")
    expect(page.locator("#server")).to_contain_text("server v")
    sleeper = threading.Thread(
        target=execute, args=(web_server, "busy one", "import time\ntime.sleep(4)")
    )
    sleeper.start()
    try:
        busy = page.locator("tr[data-pad='busy one'] .chip")
        expect(busy).to_have_text(re.compile("^busy"), timeout=SLOW)
        screenshot(page, "pads")
    finally:
        sleeper.join()
    expect(busy).to_have_text(_one_of("idle"), timeout=SLOW)
    row.get_by_role("link").click()
    expect(page.locator(".pad-header h1")).to_have_text("données/2024")
    expect(page.locator(".cell .stdout")).to_have_text("hi")
    page.goto("/")
    page.get_by_label("New pad").fill("fresh one")
    page.get_by_role("button", name="Open").click()
    expect(page.locator(".pad-header h1")).to_have_text("fresh one")
    expect(page.locator(".empty")).to_contain_text("No cells yet")


def _one_of(*words: str) -> re.Pattern[str]:
    return re.compile("^(" + "|".join(map(re.escape, words)) + ")$")


def test_routes_that_fail_say_so(page: Page) -> None:
    page.goto("/#/nowhere")
    expect(page.locator("main h1")).to_have_text("Not found")
    page.route("**/static/vault.js", lambda route: route.fulfill(status=404, body="gone"))
    page.goto("/#/vault")
    expect(page.locator("main h1")).to_have_text("The vault page did not load")
    expect(page.get_by_role("link", name="Vault")).to_have_attribute("aria-current", "page")


def test_highlighter_marks_python_and_escapes_everything(page: Page) -> None:
    page.goto("/")
    spans: list[list[str]] = page.evaluate(
        """async (code) => {
            const { highlight } = await import('/static/highlight.js');
            const box = document.createElement('pre');
            box.append(highlight(code));
            if (box.textContent !== code) throw new Error('text changed: ' + box.textContent);
            return [...box.querySelectorAll('span')].map(s => [s.className, s.textContent]);
        }""",
        "@cache\ndef f(x=0x1F):  # <script>alert(1)</script>\n"
        '    s = f"a{x + 1}b{{c}}"\n    return """one\nline two""" if x else None\n',
    )
    assert ["tok-decorator", "@cache"] in spans
    assert ["tok-keyword", "def"] in spans
    assert ["tok-function", "f"] in spans
    assert ["tok-number", "0x1F"] in spans
    assert ["tok-comment", "# <script>alert(1)</script>"] in spans
    assert ["tok-interp", "{x + 1}"] in spans
    assert ["tok-string", 'b{{c}}"'] in spans
    assert ["tok-string", '"""one\nline two"""'] in spans
    assert ["tok-constant", "None"] in spans
    assert page.locator("script:not([src])").count() == 0


@pytest.fixture(scope="module")
def tour(web_server: WebServer) -> Iterator[str]:
    """A pad with code, output, a plot and an error, recorded by another client."""
    name = "tour"
    execute(
        web_server,
        name,
        "import math\nvalues = [math.sin(i / 3) for i in range(30)]\n"
        "print(f'{len(values)} values, max {max(values):.3f}')",
    )
    execute(
        web_server,
        name,
        'import matplotlib\nmatplotlib.use("Agg")\n'
        "import matplotlib.pyplot as plt\nplt.figure(figsize=(5, 2.5))\n"
        "plt.plot(values)\nplt.title('sin')\nplt.show()",
    )
    execute(web_server, name, "values['x']")
    yield name


def test_notebook_screenshot(page: Page, tour: str) -> None:
    open_pad(page, tour)
    expect(page.locator(".cell")).to_have_count(3)
    expect(page.locator(".cell img.output-image")).to_be_visible()
    expect(page.locator(".cell .error-line")).to_contain_text("TypeError")
    page.locator("#cell-code").fill("for v in values[:3]:\n    print(round(v, 2))")
    screenshot(page, "notebook")
