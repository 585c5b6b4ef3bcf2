"""The OpenAPI document (``/openapi.json``) and its page (``/docs``), telling what the server
really does: typed answers, streams as ``text/event-stream`` described per event (OpenAPI
3.2 ``itemSchema``, the frame as the content schema of its ``data``), the one error body on
every status a route answers, and the bearer key.

Route modules declare their answers in one line with :func:`answers` / :func:`sse` (or
:func:`errors` beside answers they document themselves)::

    @app.get("/v1/pads", **answers(PadList, 500))
    @app.post("/scratchpad/execute-stream", **sse(ExecuteFrame, 400, 422))

Routes build their answers as the documented models and send them through
:func:`scratchpad.wire.wire` (``response_model=None``: FastAPI does not validate them again;
a pad's cells, validated on every call, would cost the execute path). The document adds what
every route of a guarded path answers anyway: 401 (no key, no session), 403 (a browser
session refused), 413 (a body over the limit), 500 and 507 (a full disk); the open paths but
``/healthz`` may answer 403 too.
"""

from __future__ import annotations

from collections.abc import Iterable
from copy import deepcopy
from typing import Any, get_args

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema

from scratchpad.events import members
from scratchpad.server.browser_auth import SESSION_HEADER, SIGNABLE, SIGNATURE_PARAM
from scratchpad.server.guard import OPEN_PATHS, ErrorBody
from scratchpad.server.web_routes import WEB_DIR

SCHEMAS = "#/components/schemas/"
OPENAPI_VERSION = "3.2.0"  # streams are described per event (itemSchema)
DISPOSITION = {  # headers.content_disposition: an ASCII stand-in, then the name in UTF-8
    "type": "string",
    "pattern": '^(attachment|inline); filename="[ !#-$&-\\[\\]-~]*"; '
    "filename\\*=UTF-8''[A-Za-z0-9%._~-]+$",
}
ERROR_TEXTS = {
    400: "Bad input: the message says what to change.",
    401: "Missing or wrong API key, and no live browser session: send 'Authorization: Bearer "
    "<key>' (browsers: log in with a link from `scratchpad login`).",
    403: "Refused to a browser (requests without the key): a Host that is not this server's, "
    "a change sent with a session from another site's page, or a form's session outside its "
    "form.",
    404: "No such pad, cell, file, form, connection or submission.",
    405: "Method not allowed on this route.",
    409: "A conflict the message names: the pad was closed or removed meanwhile (start it "
    "again), a form has ended, or a path is a directory where a file is needed (or the reverse).",
    413: "The request body is over the limit (SCRATCHPAD_MAX_REQUEST_BYTES; an upload: "
    "SCRATCHPAD_MAX_UPLOAD_BYTES).",
    416: "The byte range asked for starts past the end (`Content-Range: bytes */<size>` says "
    "the size).",
    422: "The body or a parameter is not of the documented shape (the message names it).",
    500: "The server could not do it (the message, or the server log, says why).",
    502: "A language-model provider failed.",
    503: "The server is not set up for this: the message says what to configure or fix. A "
    "pad that cannot be brought up here (its virtualenv, kernel or sandbox: "
    "VenvError, KernelStartError, SandboxError) answers it too. Testing "
    "credentials needs a model: SCRATCHPAD_PROBE_MODEL (else SCRATCHPAD_MODEL) as "
    "'provider:model', and that provider's key (ANTHROPIC_API_KEY, OPENAI_API_KEY) in the "
    "server's environment; restart it after.",
    507: "A write found the disk of the server's home full (the message names it): nothing "
    "half-written stays; free some space, then ask again.",
}
DESCRIPTION = (
    "Persistent Python pads over HTTP: the remote-backend protocol (`/scratchpad/*`), read "
    "endpoints and the vault (`/v1/*`), MCP at `/mcp`. Every route but `/healthz` needs "
    "`Authorization: Bearer <key>`, or a browser tab's session in the `X-Scratchpad-Session` "
    "header (a one-time login link's token traded at `POST /login`; links from `scratchpad "
    "login` or `POST /v1/login-links`); downloads also open through a short-lived signed URL "
    "(`POST /v1/signed-urls`). No cookie is read. Errors answer "
    '`{"error": ..., "type": ...}`; a method a path does not take answers 405 with `Allow` '
    "naming those it does. Streams are server-sent events: `data: <json>` frames "
    "(and `: ping` comments) separated by a blank line."
)
SECURITY_SCHEMES: dict[str, Any] = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "The server's API key."},
    "session": {
        "type": "apiKey",
        "in": "header",
        "name": SESSION_HEADER,
        "description": "A browser tab's session, from a login link's token (`POST /login`); "
        "the web UI keeps it in the tab's sessionStorage. Requests with it must name this "
        "server in `Host`; changes (POST, PUT, DELETE) must come from its own pages "
        "(`Origin`); a form's session reaches only that form; logout ends it.",
    },
}
SIGNED_SCHEME: dict[str, Any] = {
    "type": "apiKey",
    "in": "query",
    "name": SIGNATURE_PARAM,
    "description": "A download's signed URL (`POST /v1/signed-urls`): that GET only, for two "
    "minutes, while the session that signed it lives.",
}
MCP_OPERATION: dict[str, Any] = {
    "summary": "MCP (streamable HTTP)",
    "description": "The Model Context Protocol endpoint (JSON-RPC 2.0 over streamable HTTP; "
    "see the MCP specification): the `scratchpad` and `read_observation` tools.",
    "responses": {"200": {"description": "A JSON-RPC answer, as JSON or a stream of events."}},
}
TAGS = (  # (path prefix, tag): the first that matches groups an operation on /docs
    ("/scratchpad/", "remote-backend protocol"),
    ("/v1/datavault/", "credential forms"),
    ("/v1/forms/", "credential forms"),
    ("/v1/login-links", "browser sessions"),
    ("/v1/signed-urls", "browser sessions"),
    ("/login", "browser sessions"),
    ("/logout", "browser sessions"),
    ("/v1/pads/{pad}/grants", "vault"),
    ("/v1/pads/{name}/files", "files"),
    ("/v1/pads", "pads"),
    ("/v1/datasources/{engine}/{name}/test", "credential forms"),
    ("/v1/datasources", "vault"),
    ("/v1/vault/", "vault"),
    ("/mcp", "MCP"),
    ("/", "server"),
)
_models: dict[str, type[BaseModel]] = {}


def ref(model: type[BaseModel]) -> dict[str, str]:
    """A reference to ``model``'s schema (added to the document's components)."""
    known = _models.setdefault(model.__name__, model)
    if known is not model:
        raise ValueError(f"two documented models are named {model.__name__}: rename one")
    return {"$ref": SCHEMAS + model.__name__}


def error_response(status: int) -> dict[str, Any]:
    return {
        "description": ERROR_TEXTS.get(status, "An error."),
        "content": {"application/json": {"schema": ref(ErrorBody)}},
    }


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The error answers of a route (for its ``responses=``), each with the one error body."""
    return {status: error_response(status) for status in statuses}


def answers(
    body: type[BaseModel] | dict[str, Any],
    *statuses: int,
    media_type: str | Iterable[str] = "application/json",
    description: str = "Done.",
    also: dict[int, str] | None = None,
    headers: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A route decorator's keyword arguments: its answer ``body`` (a model, or a schema),
    documented under ``media_type`` (or each of several), and its error ``statuses``;
    ``also``: other success statuses with the same body (status → description);
    ``headers``: the answer's headers (name → OpenAPI header object)."""
    schema = ref(body) if isinstance(body, type) else body
    media_types = [media_type] if isinstance(media_type, str) else list(media_type)
    ok: dict[str, Any] = {
        "description": description,
        "content": {media: {"schema": schema} for media in media_types},
    }
    if headers:
        ok["headers"] = headers
    responses: dict[int | str, dict[str, Any]] = {
        200: ok,
        **{status: {**ok, "description": text} for status, text in (also or {}).items()},
        **errors(*statuses),
    }
    options: dict[str, Any] = {"response_model": None, "responses": responses}
    if media_types != ["application/json"]:  # no JSON answer besides these
        options["response_class"] = Response
    return options


def one_of(union: Any) -> dict[str, Any]:
    """The schema of an answer that is one of several models (a union told apart by a
    field, e.g. ``events.CellStanding``), each model in the document's components."""
    for model in members(union):
        ref(model)
    schema = TypeAdapter(union).json_schema(ref_template=SCHEMAS + "{model}")
    schema.pop("$defs", None)  # the document's components hold them (model_schemas)
    return schema


def sse(
    frames: Any,
    *statuses: int,
    named: bool = False,
    numbered: bool = False,
    ending: str = "the last one final",
) -> dict[str, Any]:
    """A route answering server-sent events whose ``data:`` is one of ``frames``, a union of
    models told apart by their ``type`` (``events.ExecuteFrame``, ``events.FeedFrame``):
    its schema is the union's own; ``named``: each frame also has an ``event:`` line with its
    type; ``numbered``: an ``id:`` line (0, 1, ...); ``ending``: how the stream ends."""
    models = list(members(frames))
    for model in models:  # each in the document's components, each with its Literal type
        ref(model)
        _type_values(model)
    frame = TypeAdapter(frames).json_schema(ref_template=SCHEMAS + "{model}")
    frame.pop("$defs", None)  # the document's components hold them (model_schemas)
    lines = ["`id: <n>`"] * numbered + ["`event: <type>`"] * named + ["`data: <json>`"]
    text = f"A stream of server-sent events: {' and '.join(lines)} frames, {ending}."
    options = answers({}, *statuses, media_type="text/event-stream", description=text)
    options["responses"][200]["content"]["text/event-stream"] = {
        "itemSchema": _event_schema(models, frame, named=named, numbered=numbered)
    }
    return options


def _event_schema(
    models: list[type[BaseModel]], frame: dict[str, Any], *, named: bool, numbered: bool
) -> dict[str, Any]:
    """One event of a stream (OpenAPI 3.2 ``itemSchema``): its ``data`` is JSON text whose
    content schema is the frame; ``id`` counts from 0; a named stream's ``event`` is its
    frame's ``type`` (then each event is described with its own frame)."""

    def event(content: dict[str, Any], kind: dict[str, Any] | None) -> dict[str, Any]:
        properties: dict[str, Any] = {
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": content,
            }
        }
        if kind is not None:
            properties["event"] = kind
        if numbered:
            properties["id"] = {"type": "string", "pattern": "^[0-9]+$"}
        required = ["data", *(["event"] if kind is not None else []), *(["id"] * numbered)]
        return {"type": "object", "properties": properties, "required": required}

    if not named:
        return event(frame, None)
    return {
        "oneOf": [
            event(ref(model), {"type": "string", "enum": list(_type_values(model))})
            for model in models
        ]
    }


def attachment(description: str) -> dict[str, dict[str, Any]]:
    """A download's ``headers=`` for :func:`answers`: its ``Content-Disposition``."""
    return {"content-disposition": {"description": description, "schema": DISPOSITION}}


def raw_body(description: str, media_type: str = "application/octet-stream") -> dict[str, Any]:
    """A route's ``openapi_extra`` for a body the route reads itself as bytes (not JSON)."""
    body = {"type": "string", "format": "binary"}
    content = {media_type: {"schema": body}}
    return {"requestBody": {"required": True, "description": description, "content": content}}


def _type_values(model: type[BaseModel]) -> tuple[str, ...]:
    field = model.model_fields.get("type")
    values = get_args(field.annotation) if field is not None else ()
    if not values:
        raise ValueError(f"{model.__name__} has no Literal `type` to tell its frames apart")
    return tuple(str(v) for v in values)


def api_docs(app: FastAPI) -> None:
    """Serve the document (built once, on first request) and the ``/docs`` page."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/docs", include_in_schema=False)
    async def docs() -> FileResponse:
        """Swagger UI from the server's own files: no CDN, no inline script."""
        return FileResponse(
            WEB_DIR / "docs.html", media_type="text/html", headers={"cache-control": "no-cache"}
        )


def document(app: FastAPI) -> dict[str, Any]:
    """The whole document of ``app`` (OpenAPI 3.2, for its ``itemSchema`` of streams)."""
    doc = get_openapi(
        title=app.title,
        version=app.version,
        openapi_version=OPENAPI_VERSION,
        description=DESCRIPTION,
        routes=app.routes,
    )
    doc["paths"]["/mcp"] = {method: deepcopy(MCP_OPERATION) for method in ("get", "post", "delete")}
    for path, item in doc["paths"].items():
        for operation in item.values():
            _complete(path, operation)
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):  # our 422s answer ErrorBody
        schemas.pop(name, None)
    for name, schema in model_schemas().items():
        if schemas.setdefault(name, schema) != schema:
            raise ValueError(f"two models in the document are named {name}: rename one")
    components["securitySchemes"] = {**SECURITY_SCHEMES, "signed": SIGNED_SCHEME}
    doc["security"] = [{name: []} for name in SECURITY_SCHEMES]  # either one
    for path in SIGNABLE:  # downloads: a signed URL too
        for method in ("get", "head"):
            operation = doc["paths"].get(path, {}).get(method)
            if operation is not None:
                operation["security"] = [{name: []} for name in (*SECURITY_SCHEMES, "signed")]
    return doc


def _complete(path: str, operation: dict[str, Any]) -> None:
    """What every operation answers beyond its own declarations."""
    responses = operation.setdefault("responses", {})
    if "422" in responses and "ErrorBody" not in str(responses["422"]):  # FastAPI's guess
        del responses["422"]
        if _can_be_invalid(operation):
            responses["422"] = error_response(422)  # in our shape
    if path in OPEN_PATHS:
        operation["security"] = []
    else:
        responses.setdefault("401", error_response(401))
        responses.setdefault("403", error_response(403))
        if "requestBody" in operation:
            responses.setdefault("413", error_response(413))
        responses.setdefault("500", error_response(500))
        responses.setdefault("507", error_response(507))
    operation["responses"] = dict(sorted(responses.items()))
    if not operation.get("tags"):
        operation["tags"] = [next(tag for prefix, tag in TAGS if path.startswith(prefix))]


def _can_be_invalid(operation: dict[str, Any]) -> bool:
    """Whether FastAPI may refuse the request's shape (422): a JSON body, a parameter that is
    not plain text, or a required one outside the path (a path segment is always some text;
    a raw body is read by the route itself, as bytes)."""
    if "application/json" in operation.get("requestBody", {}).get("content", {}):
        return True
    for parameter in operation.get("parameters", []):
        if parameter.get("schema", {}).get("type") != "string":
            return True
        if parameter.get("in") != "path" and parameter.get("required"):
            return True
    return False


def model_schemas() -> dict[str, Any]:
    """The schema of every documented model (and the models they hold)."""
    _, top = models_json_schema(
        [(model, "validation") for model in _models.values()],
        ref_template=SCHEMAS + "{model}",
    )
    defs: dict[str, Any] = top.get("$defs", {})
    missing = set(_models) - set(defs)
    if missing:
        raise ValueError(f"documented models without a schema of that name: {sorted(missing)}")
    return defs
