"""Small HTML answers for browsers (a login link used up, a path that needs a session, the page
a login link opens): static text, the UI's stylesheet, never cached; no inline script (the
login page loads the server's own ``/static/login.js``)."""

from __future__ import annotations

from html import escape

from starlette.responses import HTMLResponse

HOW_TO_LOG_IN = (
    "Open the login link that <code>scratchpad serve</code> printed when it started, or run "
    "<code>scratchpad login</code> (add <code>--open</code> to open it here) for a new one. "
    "A link works once, for 10 minutes."
)
LOGIN_SCRIPT = "/static/login.js"


def html_page(status: int, title: str, *paragraphs: str, script: str = "") -> HTMLResponse:
    """A page of ``paragraphs`` (trusted HTML: our own text, caller input escaped), which
    runs the module ``script`` (a path on this server) when given."""
    body = "\n".join(f"  <p>{text}</p>" for text in paragraphs)
    module = f'  <script type="module" src="{escape(script)}"></script>\n' if script else ""
    page = (
        '<!doctype html>\n<html lang="en">\n<head>\n  <meta charset="utf-8">\n'
        f"  <title>{escape(title)} · Scratchpad</title>\n"
        '  <link rel="icon" href="/static/favicon.svg" type="image/svg+xml">\n'
        f'  <link rel="stylesheet" href="/static/style.css">\n{module}</head>\n<body>\n'
        f'<main class="notice">\n  <h1>{escape(title)}</h1>\n{body}\n</main>\n</body>\n</html>\n'
    )
    return HTMLResponse(page, status_code=status, headers={"cache-control": "no-store"})


def login_needed(path: str) -> HTMLResponse:
    """The page a browser gets for a path that needs a session it cannot send (a browser
    sends a session only from the UI's script)."""
    return html_page(401, "Log in", "This address needs a browser session.", HOW_TO_LOG_IN)


def logging_in() -> HTMLResponse:
    """The page a live login link opens: its script redeems the link's token for this tab's
    session, keeps it in the tab, then goes on to the link's page."""
    return html_page(
        200,
        "Logging in",
        "Logging this tab in…",
        "<noscript>The web UI needs JavaScript: allow it for this address.</noscript>",
        script=LOGIN_SCRIPT,
    )


def link_spent() -> HTMLResponse:
    return html_page(
        401,
        "This login link no longer works",
        "It was used already, it expired, its login was logged out, or the server restarted "
        "since it was made.",
        HOW_TO_LOG_IN,
        "A credential form a model asked for waits longer than its link: once logged in, "
        'the <a href="/#/vault">Vault page</a> lists the forms waiting for you.',
    )
