"""Credential forms over HTTP: submissions and their probe, as a server-sent event stream.

``POST /v1/datavault/submissions`` stages the values (in this process's memory only) and
answers the stream of :mod:`scratchpad.connect.flow`; a request that is not a submission of
that form answers a plain 4xx before any stream starts, and a server with no model for the
probe a plain 503 saying what to configure. ``GET
/v1/datavault/submissions/{id}`` tells how a submission stands (field names, never values).
``POST /v1/datasources/{engine}/{name}/test`` probes a saved connection the same way.
(:class:`SubmissionInfo`: the status answer's model; the events' are connect/responses.py's.)

A client that goes away does not stop a probe: it runs to its verdict (a success is saved),
and the submission's status says how it ended.

A submission of a form the model asked for over MCP (a pending form, :mod:`scratchpad.connect.
pending`) is checked against the stored spec, not the one the page sends, and its success
completes that form. A request scoped to one form (:mod:`scratchpad.server.forms_routes`) may
submit only that form and read only its submissions.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal, Union

from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field

from scratchpad.connect.credentials import probe_provider, saved_submission
from scratchpad.connect.flow import submission_events
from scratchpad.connect.pending import PendingForms
from scratchpad.connect.responses import (
    ResponseCompleted,
    ResponseCreated,
    ResponseFailed,
    ResponseInProgress,
    ResponseTextDelta,
)
from scratchpad.connect.submissions import Submission, Submissions
from scratchpad.events import ErrorFrame
from scratchpad.llm.provider import Provider
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.server.browser_auth import form_scope
from scratchpad.server.forms_routes import check_scope
from scratchpad.server.openapi import answers, sse
from scratchpad.server.schemas import VaultPath
from scratchpad.server.sse import EventStream
from scratchpad.wire import wire

FINAL_EVENTS = frozenset({"response.completed", "response.failed"})
# What a submission's stream sends: connect/flow.py's events, or the server's error frame.
SubmissionEvent = Annotated[
    Union[  # noqa: UP007
        ResponseCreated,
        ResponseTextDelta,
        ResponseInProgress,
        ResponseCompleted,
        ResponseFailed,
        ErrorFrame,
    ],
    Field(discriminator="type"),
]


class SubmissionInfo(BaseModel):
    """How a submission stands: names, never values."""

    id: str
    form_id: str
    conversation_id: str | None
    engine: str
    method: str | None
    fields: list[str]
    skipped: list[str]
    connection_name: str | None
    status: Literal["staged", "probing", "success", "needs_input", "retry", "failed"]
    created_at: float
    outcome: dict[str, Any]


class SubmissionBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    form_id: str | None = None
    conversation_id: str | None = None
    values: dict[str, Any]
    skipped: list[str] = []
    form_spec: dict[str, Any]
    connection_name: str | None = Field(
        None,
        description="What the connection is saved as when its probe succeeds (a vault name; "
        "taken by then: the first free NAME-2, NAME-3...); default: the engine's next number.",
    )


def datavault_routes(
    app: FastAPI, manager: ScratchpadManager, forms: PendingForms | None = None
) -> Submissions:
    """Add the routes; the server's staged submissions. ``forms``: the model's pending forms."""
    submissions = Submissions()

    def stream(
        submission: Submission, provider: Provider, saved: tuple[str, str] | None = None
    ) -> EventStream:
        events = submission_events(
            submission,
            provider=provider,
            vault=manager.vault,
            settings=manager.settings,
            saved=saved,
        )
        if forms is not None and forms.knows(submission.form_id):
            events = forms.follow(submission.form_id, events)
        return EventStream(events, final_types=FINAL_EVENTS, named=True)

    @app.post("/v1/datavault/submissions", **sse(SubmissionEvent, 400, 403, 422, 503, named=True))
    async def submit(body: SubmissionBody, request: Request) -> EventStream:
        form_id = body.form_id if body.form_id is not None else body.form_spec.get("form_id")
        check_scope(request, form_id)
        spec = body.form_spec
        if forms is not None and (form_scope(request) is not None or forms.knows(form_id)):
            spec = forms.submission_spec(str(form_id), body.form_spec)  # the model's form
        provider = probe_provider(manager.settings)  # a bad model setting: before staging
        submission = submissions.stage(
            spec,
            body.values,
            body.skipped,
            form_id=body.form_id,
            conversation_id=body.conversation_id,
            connection_name=body.connection_name,
        )
        return stream(submission, provider)

    @app.get("/v1/datavault/submissions/{submission_id}", **answers(SubmissionInfo, 403, 404))
    async def submission(submission_id: str, request: Request) -> dict[str, Any]:
        found = submissions.get(submission_id)
        check_scope(request, found.form_id)
        return wire(SubmissionInfo.model_validate(found.describe()))

    @app.post(
        "/v1/datasources/{engine}/{name}/test",
        **sse(SubmissionEvent, 400, 403, 404, 503, named=True),
    )
    async def test(engine: VaultPath, name: VaultPath, request: Request) -> EventStream:
        check_scope(request, None)  # a session for one form tests no saved connection
        provider = probe_provider(manager.settings)
        staged = await asyncio.to_thread(
            saved_submission, manager.vault, engine, name, submissions=submissions
        )
        return stream(staged, provider, saved=(engine, name))

    return submissions
