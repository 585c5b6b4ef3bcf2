"""A credential submission's events, as the models :mod:`scratchpad.connect.flow` builds (in
the vocabulary of a streamed Responses API turn; see that module) and sends as data through
:func:`scratchpad.wire.wire`; ``/openapi.json`` documents the submission streams with them
(server/datavault_routes.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ResponseError(BaseModel):
    code: str
    message: str


class ResponseObject(BaseModel):
    """The submission as a Responses API ``response``; its status says how it ended."""

    model_config = ConfigDict(extra="allow")
    id: str
    object: Literal["response"]
    status: Literal["in_progress", "success", "needs_input", "retry", "failed"]
    submission_id: str
    form_id: str
    output_text: str | None = None
    connection: dict[str, Any] | None = Field(None, description="success: engine, name, variables.")
    error: str | ResponseError | None = None
    follow_up: str | None = None
    reason: str | None = None
    fields: list[str] | None = None


class ResponseCreated(BaseModel):
    type: Literal["response.created"]
    sequence_number: int
    response: ResponseObject


class ResponseTextDelta(BaseModel):
    """Chat text; fenced ``data-vault-form-patch`` blocks in it are patches of the form."""

    type: Literal["response.output_text.delta"]
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str


class ResponseInProgress(BaseModel):
    """What the probe does in its pad."""

    type: Literal["response.in_progress"]
    sequence_number: int
    response: ResponseObject
    thought_role: Literal["scratchpad.start", "scratchpad.result", "scratchpad.end"]
    thought: dict[str, Any]


class ResponseCompleted(BaseModel):
    """The last event of a probe that ran: ``response.status`` says how it ended."""

    type: Literal["response.completed"]
    sequence_number: int
    response: ResponseObject


class ResponseFailed(BaseModel):
    """The last event when the probe could not run (``response.error`` says why)."""

    type: Literal["response.failed"]
    sequence_number: int
    response: ResponseObject
