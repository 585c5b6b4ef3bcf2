"""The web UI's pages and static files (``server/web/``: plain ES modules and CSS, no build
step). Both are public: they are code and hold no data; what a page shows, its script reads
from the API with the tab's session (see ``browser_auth.py``)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

WEB_DIR = Path(__file__).parent / "web"
STATIC_PREFIX = "/static/"


def web_routes(app: FastAPI) -> None:
    app.mount(STATIC_PREFIX.rstrip("/"), StaticFiles(directory=WEB_DIR), name="static")

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return _page("index.html")

    @app.get("/connect/{form_id}", include_in_schema=False)
    async def connect(form_id: str) -> FileResponse:
        """A credential form a model asked for, on a page of its own (the page reads the
        form's id from its path and loads it from ``/v1/forms/{form_id}``)."""
        return _page("connect.html")


def _page(name: str) -> FileResponse:
    """An HTML page, never cached: it names the scripts of this version."""
    return FileResponse(
        WEB_DIR / name, media_type="text/html", headers={"cache-control": "no-cache"}
    )
