"""Forms the model asked for, as the page that fills one in sees them, and the form scope.

``GET /v1/forms`` lists the open ones (for the app's Vault page: a form's link may have
expired while the form still waits). ``GET /v1/forms/{form_id}`` answers ``{"form_id",
"spec", "status", "connection"}`` (the connection's engine, name and variable names once the
form is completed; never a value). The models of both answers are here (a form's spec is
vault/formcheck.py's checked form, sent as that module made it).

A request authenticated for one form only (a one-time link's browser session) carries
``request.state.auth == "form:<form_id>"``; it may read that form and submit it, and read that
form's submissions, nothing else (403 ``ForbiddenError``). Any other request has full access.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from scratchpad.connect.pending import PendingForms
from scratchpad.errors import ForbiddenError
from scratchpad.scrub import scrubber
from scratchpad.server.browser_auth import form_scope
from scratchpad.server.openapi import answers
from scratchpad.wire import made, wire

Absent = SkipJsonSchema[None]  # a key a form leaves out (never null): see FormPart


def _no_null_defaults(schema: dict[str, Any]) -> None:
    for value in schema.get("properties", {}).values():
        if "default" in value and value["default"] is None:
            del value["default"]


class FormPart(BaseModel):
    """A part of a form spec: its optional keys are left out when unset, never null."""

    model_config = ConfigDict(json_schema_extra=_no_null_defaults)


class FormOption(FormPart):
    value: str
    label: str


class FormField(FormPart):
    name: str
    label: str
    type: Literal["text", "password", "url", "select", "textarea", "boolean"]
    required: bool
    skipable: bool
    placeholder: str | Absent = None
    default: str | bool | Absent = Field(None, description="Never on a password field.")
    options: list[FormOption] | Absent = Field(None, description="A select field's choices.")
    help: str | Absent = None
    checkbox_label: str | Absent = None
    error: str | Absent = None
    warning: str | Absent = None
    status: str | Absent = None


class FormMethod(FormPart):
    """One way to authenticate, with its own fields."""

    id: str
    label: str
    description: str | Absent = None
    recommended: bool | Absent = None
    help_url: str | Absent = None
    fields: list[FormField] | Absent = None


class FormAction(FormPart):
    id: str
    label: str
    kind: Literal["primary", "secondary", "danger", "link"] | Absent = None


class FormSpec(FormPart):
    """A checked credential form (vault/formcheck.py): it never holds a value."""

    form_id: str
    engine: str
    title: str
    subtitle: str | Absent = None
    logo: str | Absent = Field(None, description="An icon name such as 'database'.")
    logo_color: str | Absent = None
    help_url: str | Absent = None
    form_warning: str | Absent = None
    form_error: str | Absent = None
    status_text: str | Absent = None
    is_probing: bool | Absent = Field(None, alias="_is_probing")
    is_success: bool | Absent = Field(None, alias="_is_success")
    selected_method: str | Absent = None
    auth_method: str | Absent = None
    fields: list[FormField] | Absent = None
    methods: list[FormMethod] | Absent = None
    actions: list[FormAction] | Absent = None


class FormConnection(BaseModel):
    """The connection a completed form was saved as: names, never values."""

    engine: str
    name: str
    variables: list[str] = Field(description="The DS_* variables pads get.")


class PendingFormInfo(BaseModel):
    """A form the model asked for over MCP, as the page that fills it in sees it."""

    form_id: str
    spec: FormSpec
    status: Literal["open", "completed", "declined", "expired"]
    connection: FormConnection | None = Field(description="Once completed.")


class WaitingForm(BaseModel):
    """An open form, as a list shows it (open it at ``/connect/{form_id}``)."""

    form_id: str
    title: str
    engine: str | None
    created_at: float = Field(description="When the model asked for it (epoch seconds).")
    expires_at: float = Field(description="When it expires unless filled in (epoch seconds).")


class WaitingForms(BaseModel):
    forms: list[WaitingForm] = Field(description="Newest first.")


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
        listed = WaitingForms.model_validate({"forms": forms.waiting()})
        scrubbed: dict[str, Any] = scrubber().scrub_data(wire(listed))
        return scrubbed

    @app.get("/v1/forms/{form_id}", **answers(PendingFormInfo, 403, 404))
    async def form(form_id: str, request: Request) -> dict[str, Any]:
        """A form the model asked for over MCP: its spec, status and, once completed, the
        connection's names."""
        check_scope(request, form_id)
        described = made(PendingFormInfo, forms.get(form_id).describe())  # its spec as checked
        scrubbed: dict[str, Any] = scrubber().scrub_data(wire(described))
        return scrubbed  # the model's text, scrubbed like every answer that may carry it
