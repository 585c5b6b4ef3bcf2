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


def html_page(status: int, title: str, *paragraphs: str) -> HTMLResponse:
    """A page of ``paragraphs`` (trusted HTML: our own text, never caller input)."""
    body = "\n".join(f"  <p>{text}</p>" for text in paragraphs)
    page = (
        '<!doctype html>\n<html lang="en">\n<head>\n  <meta charset="utf-8">\n'
        f"  <title>{escape(title)} · Scratchpad</title>\n"
        '  <link rel="stylesheet" href="/static/style.css">\n</head>\n<body>\n'
        f'<main class="notice">\n  <h1>{escape(title)}</h1>\n{body}\n</main>\n</body>\n</html>\n'
    )
    return HTMLResponse(page, status_code=status, headers={"cache-control": "no-store"})


def login_needed() -> HTMLResponse:
    return html_page(
        401, "Log in to Scratchpad", "This page needs a browser session.", HOW_TO_LOG_IN
    )


def link_spent() -> HTMLResponse:
    return html_page(
        401,
        "This login link no longer works",
        "It was used already, it expired, or the server restarted since it was made.",
        HOW_TO_LOG_IN,
    )
