"""Forms the model asked for, as the page that fills one in sees them, and the form scope.

``GET /v1/forms`` lists the open ones (for the app's Vault page: a form's link may have
expired while the form still waits). ``GET /v1/forms/{form_id}`` answers ``{"form_id",
"spec", "status", "connection"}`` (the connection's engine, name and variable names once the
form is completed; never a value).

A request authenticated for one form only (a one-time link's browser session) carries
``request.state.auth == "form:<form_id>"``; it may read that form and submit it, and read that
form's submissions, nothing else (403 ``ForbiddenError``). Any other request has full access.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from scratchpad.connect.pending import PendingForms
from scratchpad.errors import ForbiddenError
from scratchpad.scrub import scrubber
from scratchpad.server.browser_auth import form_scope
from scratchpad.server.openapi import answers
from scratchpad.server.web_schemas import PendingFormInfo, WaitingForms


def check_scope(request: Request, form_id: object) -> None:
    """Raise :class:`ForbiddenError` (403) unless this request may touch form ``form_id``."""
    scope = form_scope(request)
    if scope is not None and form_id != scope:
        raise ForbiddenError(
            f"this session may only fill in form {scope!r}; open the link the model gave "
            "for the other form, or use the API key"
        )


def forms_routes(app: FastAPI, forms: PendingForms) -> None:
    """Add the route."""

    @app.get("/v1/forms", **answers(WaitingForms, 403))
    async def waiting(request: Request) -> dict[str, Any]:
        """The forms the model asked for that wait for a person, newest first."""
        check_scope(request, None)
        listed: dict[str, Any] = scrubber().scrub_data({"forms": forms.waiting()})
        return listed

    @app.get("/v1/forms/{form_id}", **answers(PendingFormInfo, 403, 404))
    async def form(form_id: str, request: Request) -> dict[str, Any]:
        """A form the model asked for over MCP: its spec, status and, once completed, the
        connection's names."""
        check_scope(request, form_id)
        described: dict[str, Any] = scrubber().scrub_data(forms.get(form_id).describe())
        return described  # the model's text, scrubbed like every answer that may carry it
