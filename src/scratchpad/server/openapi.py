"""The OpenAPI document (``/openapi.json``) and its page (``/docs``), telling what the server
really does: typed answers, streams as ``text/event-stream`` with their frames, the one error
body on every status a route answers, and the bearer key.

Route modules declare their answers in one line with :func:`answers` / :func:`sse` (or
:func:`errors` beside answers they document themselves)::

    @app.get("/v1/pads", **answers(PadList, 500))
    @app.post("/scratchpad/execute-stream", **sse(EXECUTE_FRAMES, 400, 422))

Answers are documented, never validated (``response_model=None``): validating a pad's cells
again on every call would cost the execute path. The document adds what every route of a
guarded path answers anyway: 401 (no key), 413 (a body over the limit) and 500.
"""

from __future__ import annotations

from collections.abc import Iterable
from copy import deepcopy
from typing import Any, get_args

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from scratchpad.server.guard import OPEN_PATHS
from scratchpad.server.schemas import ErrorBody
from scratchpad.server.web_routes import WEB_DIR

SCHEMAS = "#/components/schemas/"
ERROR_TEXTS = {
    400: "Bad input: the message says what to change.",
    401: "Missing or wrong API key: send 'Authorization: Bearer <key>'.",
    404: "No such pad, cell, connection or submission.",
    405: "Method not allowed on this route.",
    409: "The pad was closed or removed meanwhile: start it again.",
    413: "The request body is over the limit (SCRATCHPAD_MAX_REQUEST_BYTES).",
    422: "The body is not JSON of the documented shape (the message names the field).",
    500: "The server could not do it (the message, or the server log, says why).",
    502: "A language-model provider failed.",
}
DESCRIPTION = (
    "Persistent Python pads over HTTP: the remote-backend protocol (`/scratchpad/*`), read "
    "endpoints and the vault (`/v1/*`), MCP at `/mcp`. Every route but `/healthz` needs "
    '`Authorization: Bearer <key>`. Errors answer `{"error": ..., "type": ...}`. Streams '
    "are server-sent events: `data: <json>` frames (and `: ping` comments) separated by a "
    "blank line."
)
MCP_OPERATION: dict[str, Any] = {
    "summary": "MCP (streamable HTTP)",
    "description": "The Model Context Protocol endpoint (JSON-RPC 2.0 over streamable HTTP; "
    "see the MCP specification): the `scratchpad` and `read_observation` tools.",
    "responses": {"200": {"description": "A JSON-RPC answer, as JSON or a stream of events."}},
}
TAGS = (  # (path prefix, tag): the first that matches groups an operation on /docs
    ("/scratchpad/", "remote-backend protocol"),
    ("/v1/datavault/", "credential forms"),
    ("/v1/pads/{pad}/grants", "vault"),
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
    media_type: str = "application/json",
    description: str = "Done.",
) -> dict[str, Any]:
    """A route decorator's keyword arguments: its answer ``body`` (a model, or a schema),
    documented under ``media_type``, and its error ``statuses``."""
    schema = ref(body) if isinstance(body, type) else body
    responses: dict[int | str, dict[str, Any]] = {
        200: {"description": description, "content": {media_type: {"schema": schema}}},
        **errors(*statuses),
    }
    options: dict[str, Any] = {"response_model": None, "responses": responses}
    if media_type != "application/json":  # no JSON answer besides this one
        options["response_class"] = Response
    return options


def sse(frames: Iterable[type[BaseModel]], *statuses: int, named: bool = False) -> dict[str, Any]:
    """A route answering server-sent events whose ``data:`` is one of ``frames`` (told apart
    by their ``type``); ``named``: each frame also has an ``event:`` line with its type."""
    models = list(frames)
    mapping = {kind: SCHEMAS + m.__name__ for m in models for kind in _type_values(m)}
    schema = {
        "oneOf": [ref(m) for m in models],
        "discriminator": {"propertyName": "type", "mapping": mapping},
    }
    how = "`event: <type>` and `data: <json>`" if named else "`data: <json>`"
    text = f"A stream of server-sent events: {how} frames, the last one final."
    return answers(schema, *statuses, media_type="text/event-stream", description=text)


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
    """The whole document of ``app``."""
    doc = get_openapi(
        title=app.title, version=app.version, description=DESCRIPTION, routes=app.routes
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
    components["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer", "description": "The server's API key."}
    }
    doc["security"] = [{"bearer": []}]
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
        if "requestBody" in operation:
            responses.setdefault("413", error_response(413))
        responses.setdefault("500", error_response(500))
    operation["responses"] = dict(sorted(responses.items()))
    if not operation.get("tags"):
        operation["tags"] = [next(tag for prefix, tag in TAGS if path.startswith(prefix))]


def _can_be_invalid(operation: dict[str, Any]) -> bool:
    """Whether FastAPI may refuse the request's shape (422): a body, or a parameter that is
    not a plain string in the path (a path segment is always some string)."""
    if "requestBody" in operation:
        return True
    for parameter in operation.get("parameters", []):
        if parameter.get("in") != "path" or parameter.get("schema", {}).get("type") != "string":
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
