"""A pad's pages tell the truth, in a real browser against a real server: the header's status
while a cell runs, a badge per ending, a timed-out cell headed by its timeout, outputs in the
order they came (markdown as elements, HTML with a stylesheet of its own), long output kept in
bounds, Reset saying what it deletes, questions that end with their page, no actions on a pad
that does not exist, the files' dates and folders, and a phone's width."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, ViewportSize, expect

from tests.web.conftest import WebServer, login_link, screenshot
from tests.web.test_notebook import SLOW, client, execute, finished, open_pad, run

PHONE: ViewportSize = {"width": 390, "height": 844}

# The lines a text node of `el` takes on the screen (a word broken across two counts twice).
LINES = """(el) => {
    const range = document.createRange();
    range.selectNodeContents(el);
    return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
}"""


def execute_with(server: WebServer, name: str, code: str, **more: Any) -> dict[str, Any]:
    """A cell run by another client with more of the protocol's fields (`timeout_s`, …)."""
    body = {"name": name, "code": code, **more}
    with client(server) as http, http.stream("POST", "/scratchpad/execute-stream", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and json.loads(line[6:])["type"] == "cell":
                return dict(json.loads(line[6:])["cell"])
    raise AssertionError("no cell frame")


def chip(page: Page) -> Locator:
    return page.locator(".pad-header .chip")


def test_the_header_is_busy_while_a_cell_runs(page: Page, web_server: WebServer) -> None:
    open_pad(page, "header")
    finished(run(page, "1"))
    expect(chip(page)).to_have_text("idle")
    cell = run(page, "import time\ntime.sleep(3)")
    expect(chip(page)).to_have_text(re.compile(r"^busy"), timeout=SLOW)
    expect(chip(page)).to_have_class(re.compile(r"status-busy"))
    finished(cell)
    expect(chip(page)).to_have_text("idle")
    agent = threading.Thread(target=execute, args=(web_server, "header", "time.sleep(3)"))
    agent.start()  # another client's cell: the same
    try:
        expect(chip(page)).to_have_text(re.compile(r"^busy"), timeout=SLOW)
    finally:
        agent.join()
    expect(chip(page)).to_have_text("idle")


ENDINGS = ["ok", "error", "timeout", "killed", "cancelled"]


def test_each_ending_has_its_own_badge(page: Page, web_server: WebServer) -> None:
    name = "endings"
    execute(web_server, name, "1")
    execute(web_server, name, "1 / 0")
    timed_out = execute_with(web_server, name, "import time\ntime.sleep(30)", timeout_s=2)
    assert timed_out["status"] == "timeout", timed_out
    killed = execute(web_server, name, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert killed["status"] == "killed", killed
    open_pad(page, name)
    expect(page.locator(".cell")).to_have_count(4)
    sleeper = run(page, "import time\nprint('asleep', flush=True)\ntime.sleep(60)")
    expect(sleeper.locator(".stdout")).to_contain_text("asleep", timeout=SLOW)
    sleeper.get_by_role("button", name="Cancel").click()
    finished(sleeper, "cancelled")
    badges = page.locator(".cell .badge")
    expect(badges).to_have_text(ENDINGS)
    colours = badges.evaluate_all("(all) => all.map((b) => getComputedStyle(b).color)")
    assert len(set(colours)) == len(ENDINGS), dict(zip(ENDINGS, colours, strict=True))
    text = page.evaluate("getComputedStyle(document.body).color")
    assert text not in colours, (text, colours)
    screenshot(page, "endings")


def test_a_timed_out_cell_is_headed_by_its_timeout(page: Page, web_server: WebServer) -> None:
    cell = execute_with(web_server, "slow", "import time\ntime.sleep(30)", timeout_s=2)
    assert cell["status"] == "timeout", cell
    open_pad(page, "slow")
    timeout = page.locator(".cell[data-status='timeout']")
    expect(timeout.locator(".error-line")).to_have_text(re.compile(r"^Cell timed out after 2 ?s"))
    timeout.locator("summary").click()
    expect(timeout.locator(".traceback")).to_contain_text("KeyboardInterrupt")


MIXED = """import sys, time
class Note:
    def _repr_markdown_(self):
        return ("# Findings\\n\\nRevenue is **up** by `12%`, see [the report](https://example.com)"
                " and <b id='raw'>not HTML</b>.\\n\\n- north\\n- south")
class Table:
    def _repr_html_(self):
        return ('<style scoped>.dataframe tbody tr th { vertical-align: top; }</style>'
                '<table border="1" class="dataframe"><thead><tr><th></th><th>city</th>'
                '<th>sales</th></tr></thead><tbody><tr><th>0</th><td>Lyon</td><td>12</td></tr>'
                '<tr><th>1</th><td>Porto</td><td>7</td></tr></tbody></table>'
                '<script>document.body.dataset.ran = "yes"</script>')
print('first', flush=True); time.sleep(0.3)
display(Note()); time.sleep(0.3)
print('warned', file=sys.stderr, flush=True); time.sleep(0.3)
display(Table()); time.sleep(0.3)
print('last', flush=True)"""
MADE = ["stdout", "output-markdown", "stderr", "output-html", "stdout"]
KINDS = """(cell) => [...cell.querySelectorAll(
        '.outputs pre.stream, .output-markdown, .output-html')]
    .map((e) => e.classList.contains('stream') ? e.classList[1] : e.className)"""


@pytest.fixture(scope="module")
def mixed(browser: Browser, web_server: WebServer) -> Iterator[Locator]:
    """A cell of mixed outputs, run (and seen) on a page of the module's own."""
    context = browser.new_context(base_url=web_server.url, viewport={"width": 1280, "height": 800})
    seen = context.new_page()
    seen.goto(login_link(web_server))
    seen.wait_for_url(f"{web_server.url}/")
    open_pad(seen, "mixed")
    yield finished(run(seen, MIXED))
    context.close()


def test_outputs_come_in_the_order_they_were_made(mixed: Locator) -> None:
    kinds = mixed.evaluate(KINDS)
    assert kinds == MADE, kinds


def test_a_recorded_cell_keeps_its_order_after_a_reload(mixed: Locator, page: Page) -> None:
    open_pad(page, "mixed")  # a page that did not watch it run: the cell's record says
    recorded = finished(page.locator(".cell").first)
    expect(recorded.locator("iframe.output-html")).to_have_count(1)
    assert recorded.evaluate(KINDS) == MADE
    expect(recorded.locator("pre.stream")).to_have_text(["first", "warned", "last"])
    page.reload()
    again = finished(page.locator(".cell").first)
    expect(again.locator("iframe.output-html")).to_have_count(1)
    assert again.evaluate(KINDS) == MADE


PIECES = "for i in range(3000):\n    print('row 😀', i)\ndisplay('between')\nprint('after')"


def test_show_all_of_a_piece_before_a_display_reads_that_piece(
    page: Page, web_server: WebServer
) -> None:
    execute(web_server, "pieces", PIECES)
    open_pad(page, "pieces")
    cell = page.locator(".cell").first
    first, after = cell.locator("pre.stdout").first, cell.locator("pre.stdout").last
    expect(after).to_have_text("after\n")
    first.get_by_role("button", name=re.compile("show all")).click()
    expect(first).to_contain_text("row 😀 1500")
    rows = first.evaluate("(pre) => pre.lastChild.data.split('\\n')")
    assert rows[0] == "row 😀 0" and rows[-2:] == ["row 😀 2999", ""] and len(rows) == 3001


RICH_RESULT = """class Table:
    def _repr_html_(self):
        return '<table class="dataframe"><tr><th>city</th></tr><tr><td>Lyon</td></tr></table>'
    def __repr__(self):
        return 'Table(1 row)'
Table()"""
NOTE_RESULT = """class Note:
    def _repr_markdown_(self):
        return '**bold** result'
Note()"""


def test_a_rich_result_shows_as_its_richest_form(page: Page, web_server: WebServer) -> None:
    execute(web_server, "rich", RICH_RESULT)
    execute(web_server, "rich", NOTE_RESULT)
    execute(web_server, "rich", "41 + 1")
    open_pad(page, "rich")
    table, note, plain = (page.locator(".cell").nth(i).locator(".result") for i in range(3))
    frame = table.locator("iframe.output-html")
    expect(frame).to_have_attribute("sandbox", "")
    expect(frame.content_frame.locator("td")).to_have_text("Lyon")
    expect(frame.content_frame.locator("table.dataframe")).to_have_css(
        "border-collapse", "collapse"
    )  # the frame's own stylesheet
    expect(table).not_to_contain_text("Table(1 row)")
    expect(note.locator(".output-markdown strong")).to_have_text("bold")
    expect(plain.locator("pre.result-text")).to_have_text("42")
    screenshot(page, "rich-result")


def test_markdown_shows_as_elements_never_as_markup(mixed: Locator) -> None:
    note = mixed.locator(".output-markdown")
    expect(note.locator("h1")).to_have_text("Findings")
    expect(note.locator("strong")).to_have_text("up")
    expect(note.locator("code")).to_have_text("12%")
    expect(note.locator("a")).to_have_attribute("href", "https://example.com")
    expect(note.locator("li")).to_have_text(["north", "south"])
    expect(note).to_contain_text("<b id='raw'>not HTML</b>")
    assert mixed.page.locator("#raw").count() == 0


def test_html_output_has_a_stylesheet_and_no_script(mixed: Locator) -> None:
    frame = mixed.locator("iframe.output-html")
    expect(frame).to_have_attribute("sandbox", "")
    table = frame.content_frame.locator("table.dataframe")
    expect(table).to_have_css("border-collapse", "collapse")  # the frame's own stylesheet
    expect(frame.content_frame.locator("body")).not_to_have_css(
        "font-family", re.compile("Times", re.I)
    )
    expect(table.locator("td").first).to_have_text("Lyon")
    expect(frame.content_frame.locator("body")).not_to_have_attribute("data-ran", "yes")
    mixed.scroll_into_view_if_needed()
    screenshot(mixed.page, "outputs")


CHATTY = "import time\nfor i in range(400):\n    print('line', i, flush=True)\n    time.sleep(0.02)"
FOLLOWING = """(pre) => pre.scrollHeight > pre.clientHeight + 100
    && pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4"""


def test_long_output_stays_in_bounds_follows_and_folds(page: Page, web_server: WebServer) -> None:
    execute(web_server, "long", "for i in range(3000):\n    print('row', i)")
    open_pad(page, "long")
    recorded = page.locator(".cell").first.locator("pre.stdout")
    expect(recorded).to_contain_text("row 2999")
    assert recorded.evaluate("(pre) => pre.getBoundingClientRect().height") < 480
    recorded.get_by_role("button", name=re.compile("show all")).click()
    expect(recorded).to_contain_text("row 1500")
    assert recorded.evaluate("(pre) => pre.getBoundingClientRect().height") < 480
    recorded.get_by_role("button", name="show less").click()
    expect(recorded).not_to_contain_text("row 1500")
    expect(recorded.get_by_role("button", name=re.compile("show all"))).to_be_visible()

    live = run(page, CHATTY)
    stream = live.locator("pre.stdout")
    expect(stream).to_contain_text("line 60", timeout=SLOW)
    page.wait_for_function(FOLLOWING, arg=stream.element_handle(), timeout=SLOW)
    expect(live).to_have_attribute("data-status", "running")
    expect(stream).to_contain_text("line 200", timeout=SLOW)
    assert stream.evaluate(FOLLOWING), "the live output stopped following its tail"
    assert stream.evaluate("(pre) => pre.getBoundingClientRect().height") < 480
    finished(live)
    assert page.evaluate("document.scrollingElement.scrollHeight") < 2400


def test_reset_says_what_it_deletes_and_the_page_shows_it(page: Page) -> None:
    open_pad(page, "resetting")
    finished(run(page, "x = 1"))
    finished(run(page, "print(x)"))
    page.get_by_role("button", name="Reset").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("every recorded cell is deleted")
    expect(dialog).not_to_contain_text("Recorded cells stay")
    dialog.get_by_role("button", name="Reset").click()
    expect(page.locator(".cell")).to_have_count(0)
    expect(page.locator(".notice")).to_contain_text("recorded cells are gone")
    page.reload()
    expect(page.locator(".pad-header h1")).to_have_text("resetting")
    expect(page.locator(".empty")).to_be_visible()
    expect(page.locator(".cell")).to_have_count(0)


def test_a_reset_by_another_client_shows_at_once(page: Page, web_server: WebServer) -> None:
    execute(web_server, "shared reset", "y = 2")
    open_pad(page, "shared reset")
    expect(page.locator(".cell")).to_have_count(1)
    with client(web_server) as http:
        assert http.post("/scratchpad/reset", json={"name": "shared reset"}).status_code == 200
    expect(page.locator(".cell")).to_have_count(0)
    expect(page.locator(".empty")).to_be_visible()


def test_a_question_ends_with_its_page(page: Page, web_server: WebServer) -> None:
    for name in ("left", "right"):
        execute(web_server, name, f"print('{name}')")
    open_pad(page, "left")
    open_pad(page, "right")
    page.get_by_role("button", name="Remove").click()
    expect(page.get_by_role("dialog")).to_be_visible()
    page.go_back()
    expect(page.locator(".pad-header h1")).to_have_text("left")
    expect(page.get_by_role("dialog")).to_have_count(0)
    with client(web_server) as http:
        names = [pad["name"] for pad in http.get("/v1/pads").json()["pads"]]
    assert {"left", "right"} <= set(names)


def test_a_pad_that_does_not_exist_offers_no_reset_or_remove(page: Page) -> None:
    open_pad(page, "never made")
    expect(page.locator(".empty")).to_contain_text("No cells yet")
    for action in ("Reset", "Remove"):
        expect(page.get_by_role("button", name=action)).to_have_count(0)
    expect(page.get_by_role("link", name="Download .ipynb")).to_have_count(0)
    finished(run(page, "1"))
    for action in ("Reset", "Remove"):
        expect(page.get_by_role("button", name=action)).to_be_visible(timeout=SLOW)


@pytest.fixture(scope="module")
def filed(web_server: WebServer) -> str:
    """A pad with a file and a folder that holds one."""
    code = (
        "import os\nos.makedirs('data', exist_ok=True)\nopen('data/x.csv', 'w').write('1')\n"
        "open('notes.txt', 'w').write('n')"
    )
    execute(web_server, "filed", code)
    return "/#/pads/filed/files"


def test_files_show_when_they_changed(page: Page, filed: str) -> None:
    page.goto(filed)
    notes = page.locator("tr[data-path='notes.txt']")
    expect(notes).to_be_visible()
    expect(page.locator("table.files")).not_to_contain_text("Invalid Date")
    expect(notes.locator("td").nth(1)).to_have_text(re.compile(r"20\d\d"))


def test_deleting_a_folder_promises_only_what_the_server_does(page: Page, filed: str) -> None:
    page.goto(filed)
    folder = page.locator("tr[data-path='data']")
    folder.get_by_role("button", name="Delete data").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("if it is empty")
    expect(dialog).not_to_contain_text("everything in it")
    dialog.get_by_role("button", name="Delete").click()
    expect(page.locator(".notice.bad")).to_contain_text("not empty")
    expect(folder).to_be_visible()


def test_files_can_be_deleted_on_a_phone(page: Page, filed: str) -> None:
    page.set_viewport_size(PHONE)
    page.goto(filed)
    notes = page.locator("tr[data-path='notes.txt']")
    delete = notes.get_by_role("button", name="Delete notes.txt")
    expect(delete).to_be_visible()
    expect(delete).to_be_in_viewport()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(page, "files-phone")


TABLE_TEXT = (
    "print('          city  population  area_km2  density  founded\\n'"
    " + '\\n'.join(f'{i}  {c:>12}  {p:>10}  {a:>8}  {p / a:>7.1f}  {y:>7}'"
    " for i, (c, p, a, y) in enumerate([('Berlin', 3645000, 891.8, 1237),"
    " ('Lyon', 522000, 47.9, -43), ('Porto', 232000, 41.4, 868)])))"
)


NAME = "quarterly_revenue_forecasts"


@pytest.fixture(scope="module")
def tabled(web_server: WebServer) -> str:
    execute(web_server, NAME, TABLE_TEXT)
    return NAME


def test_a_phone_shows_pad_names_whole(page: Page, tabled: str) -> None:
    page.set_viewport_size(PHONE)
    page.goto("/")
    link = page.locator(f"tr[data-pad='{tabled}'] th a")
    expect(link).to_be_visible(timeout=SLOW)
    assert link.evaluate(LINES) == 1, "the pad's name breaks in the list"
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(page, "pads-phone")
    open_pad(page, tabled)
    assert page.locator(".pad-header h1").evaluate(LINES) == 1, "the name breaks in the header"


def test_a_phone_keeps_a_text_table_unwrapped(page: Page, tabled: str) -> None:
    page.set_viewport_size(PHONE)
    open_pad(page, tabled)
    table = page.locator(".cell pre.stdout")
    expect(table).to_contain_text("Porto")
    assert table.evaluate(LINES) == 4, "the table's lines wrap"
    assert table.evaluate("(pre) => pre.scrollWidth > pre.clientWidth")  # it scrolls sideways
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(page, "notebook-phone")


@pytest.fixture(autouse=True)
def _no_page_errors(page: Page) -> Any:
    """A script error of the page fails its test."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield
    assert errors == [], errors
