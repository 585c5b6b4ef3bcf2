"""Small HTML answers for browsers (a login link used up, a page opened without logging in):
static text, no script, the UI's stylesheet, never cached."""

from __future__ import annotations

from html import escape

from starlette.responses import HTMLResponse

HOW_TO_LOG_IN = (
    "Open the login link that <code>scratchpad serve</code> printed when it started, or run "
    "<code>scratchpad login</code> (add <code>--open</code> to open it here) for a new one. "
    "A link works once, for 10 minutes."
)


def html_page(status: int, title: str, *paragraphs: str, refresh: str = "") -> HTMLResponse:
    """A page of ``paragraphs`` (trusted HTML: our own text, caller input escaped), which
    goes on to ``refresh`` (a path on this server) at once when given."""
    body = "\n".join(f"  <p>{text}</p>" for text in paragraphs)
    meta = f'  <meta http-equiv="refresh" content="0; url={escape(refresh)}">\n' if refresh else ""
    page = (
        '<!doctype html>\n<html lang="en">\n<head>\n  <meta charset="utf-8">\n'
        f"{meta}  <title>{escape(title)} · Scratchpad</title>\n"
        '  <link rel="icon" href="/static/favicon.svg" type="image/svg+xml">\n'
        '  <link rel="stylesheet" href="/static/style.css">\n</head>\n<body>\n'
        f'<main class="notice">\n  <h1>{escape(title)}</h1>\n{body}\n</main>\n</body>\n</html>\n'
    )
    return HTMLResponse(page, status_code=status, headers={"cache-control": "no-store"})


def login_needed(path: str) -> HTMLResponse:
    """The page a browser without a session gets. A browser that has one but did not send it
    (its SameSite=Strict cookie stays home when a link on another site led here) sends it
    when the person follows a link on this page."""
    lines = ["This page needs a browser session.", HOW_TO_LOG_IN]
    if is_local_path(path):
        lines.append(f'Logged in already? <a href="{escape(path)}">Open this page again</a>.')
    return html_page(401, "Log in", *lines)


def logged_in(next_path: str) -> HTMLResponse:
    """The answer to a login link: it sets the cookie, then goes on from here (a same-site
    step, so the SameSite=Strict cookie is sent even when a link on another site led here)."""
    link = f'<a href="{escape(next_path)}">Continue</a>.'
    return html_page(200, "Logged in", f"This browser is logged in. {link}", refresh=next_path)


def is_local_path(path: str) -> bool:
    """A path on this server (no ``//host``, which a browser reads as another site)."""
    return path.startswith("/") and not path.startswith(("//", "/\\"))


def link_spent() -> HTMLResponse:
    return html_page(
        401,
        "This login link no longer works",
        "It was used already, it expired, or the server restarted since it was made.",
        HOW_TO_LOG_IN,
    )
