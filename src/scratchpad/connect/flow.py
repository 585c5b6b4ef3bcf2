"""A submission's stream: check it, probe it, save it, and tell the form and the chat.

The events use the vocabulary of a streamed Responses API turn, so a client that reads one
reads the other: ``response.created``; ``response.output_text.delta`` (the chat line, and
``data-vault-form-patch`` blocks that keep the form live); ``response.in_progress`` (the
probe's scratchpad calls: ``thought_role`` ``scratchpad.start`` / ``scratchpad.result`` /
``scratchpad.end``); then ``response.completed`` (``response.status``: success, needs_input,
retry or failed) or ``response.failed`` (the probe could not run). Each has a
``sequence_number`` from 0. What the probe made (its prose, cells, statuses, verdict texts and
fields) is scrubbed of every submitted value as it leaves the probe.

- retry: the engine's shape check failed (no probe ran); the fields say what to fix.
- success: the connection is saved as a new one (never over another: under the submission's
  connection name, else the first free ``NAME-2``...; without one, the next number), or for a
  connection already saved (:func:`saved_submission`), nothing is written.
- failed: the vault is untouched; the form shows the diagnosis.
- needs_input: the fields the probe asked for are appended to the form.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from scratchpad.config import Settings
from scratchpad.connect.probe import Probe
from scratchpad.connect.probe_tools import ProbeEvent, Verdict
from scratchpad.connect.prompt import PROBE_PAD
from scratchpad.connect.responses import (
    ResponseCompleted,
    ResponseCreated,
    ResponseError,
    ResponseFailed,
    ResponseInProgress,
    ResponseObject,
    ResponseTextDelta,
)
from scratchpad.connect.scrubbing import SubmissionScrubber
from scratchpad.connect.submissions import Submission
from scratchpad.errors import InvalidInputError, ScratchpadError
from scratchpad.llm.provider import Provider
from scratchpad.scrub import MIN_SECRET_CHARS
from scratchpad.text import cut_middle
from scratchpad.vault.engines import shape_problems
from scratchpad.vault.forms import patch_block
from scratchpad.vault.names import env_name
from scratchpad.vault.store import Vault
from scratchpad.wire import wire

log = logging.getLogger(__name__)
CELL_TEXT_CHARS = 8000
SUCCESS_ACTIONS = [
    {"id": "close", "label": "Close", "kind": "secondary"},
    {"id": "view_connections", "label": "View connections →", "kind": "primary"},
]


class ResponseEvents:
    """The events of one stream, numbered in order (connect/responses.py's models, sent as
    data). What the probe made is scrubbed where it comes out of the probe; names and ids
    (engine, connection, fields) are shown as they are."""

    def __init__(self, submission: Submission) -> None:
        self.submission = submission
        self._sequence = 0

    def _number(self) -> int:
        number = self._sequence
        self._sequence += 1
        return number

    def response(self, status: str, **more: Any) -> ResponseObject:
        sub = self.submission
        return ResponseObject(
            id=sub.id,
            object="response",
            status=status,
            submission_id=sub.id,
            form_id=sub.form_id,
            **more,
        )

    def ended(self, status: str, **outcome: Any) -> None:
        """Record how the submission ended (what ``describe()`` shows)."""
        self.submission.status = status
        self.submission.outcome = {"status": status, **outcome}

    def created(self) -> dict[str, Any]:
        response = self.response("in_progress")
        return wire(
            ResponseCreated(
                type="response.created", sequence_number=self._number(), response=response
            )
        )

    def text(self, text: str) -> dict[str, Any]:
        return wire(
            ResponseTextDelta(
                type="response.output_text.delta",
                sequence_number=self._number(),
                item_id=self.submission.id,
                output_index=0,
                content_index=0,
                delta=text,
            )
        )

    def patch(self, **changes: Any) -> list[dict[str, Any]]:
        """The patch as a block in a text delta; none (logged) if it is not a valid patch."""
        try:
            block = patch_block({"form_id": self.submission.form_id, **changes})
        except InvalidInputError as exc:
            log.warning("a form patch of submission %s was left out: %s", self.submission.id, exc)
            return []
        return [self.text("\n" + block + "\n")]

    def thought(self, role: str, **thought: Any) -> dict[str, Any]:
        response = self.response("in_progress")
        return wire(
            ResponseInProgress(
                type="response.in_progress",
                sequence_number=self._number(),
                response=response,
                thought_role=role,
                thought=thought,
            )
        )

    def completed(self, status: str, text: str, **more: Any) -> dict[str, Any]:
        response = self.response(status, output_text=text, **more)
        return wire(
            ResponseCompleted(
                type="response.completed", sequence_number=self._number(), response=response
            )
        )

    def failed(self, message: str, code: str) -> dict[str, Any]:
        error = ResponseError(code=code, message=message)
        response = self.response("failed", error=error)
        return wire(
            ResponseFailed(
                type="response.failed", sequence_number=self._number(), response=response
            )
        )


async def submission_events(
    submission: Submission,
    *,
    provider: Provider,
    vault: Vault,
    settings: Settings,
    saved: tuple[str, str] | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """The whole stream of one submission (see the module docstring). ``saved``: the
    (engine, name) the values come from, when testing a stored connection."""
    events = ResponseEvents(submission)
    scrub = SubmissionScrubber(submission)
    yield events.created()
    submission.status = "probing"
    try:
        problems = {name: scrub(text) for name, text in _problems(submission).items()}
        if problems:
            for event in _retry(events, problems):
                yield event
            return
        yield events.text(f"Testing the {submission.engine} connection…\n")
        cleared = {f["name"]: {"error": None, "status": None} for f in submission.fields()}
        for event in events.patch(_is_probing=True, _is_success=None, form_error=None,
                                  form_warning=None, status_text="Testing the connection…",
                                  **_field_changes(submission, cleared)):  # fmt: skip
            yield event
        probe = Probe(submission, provider=provider, settings=settings, scrub=scrub)
        open_cell = False
        try:
            async for probe_event in probe.events():
                open_cell = probe_event.kind == "cell_start" or (
                    open_cell and probe_event.kind != "cell_result"
                )
                for event in _translated(events, probe_event):
                    yield event
        except Exception:
            if open_cell:  # the probe ended while a cell ran: the cell ends with it
                yield events.thought("scratchpad.end", pad=PROBE_PAD, ok=False)
            raise
        if open_cell:
            yield events.thought("scratchpad.end", pad=PROBE_PAD, ok=False)
        for event in await _verdict(events, probe.verdict, vault, saved):
            yield event
    except ScratchpadError as exc:
        message = scrub(f"The connection could not be tested: {exc}")
        for event in _fail(events, message, exc):
            yield event
    except Exception as exc:
        log.exception("the probe of submission %s failed", submission.id)
        for event in _fail(events, "The connection could not be tested: internal error.", exc):
            yield event
    finally:
        submission.forget_values()


def _problems(submission: Submission) -> dict[str, str]:
    """The engine's shape check, and secrets too short to be kept secret."""
    values = {k: v for k, v in submission.values.items() if k not in submission.skipped}
    problems = shape_problems(submission.form, values, submission.skipped)
    for name in submission.secret_fields():
        if 0 < len(values.get(name, "")) < MIN_SECRET_CHARS:
            problems.setdefault(
                name, f"Too short to keep secret: use at least {MIN_SECRET_CHARS} characters."
            )
    return problems


def _retry(events: ResponseEvents, problems: dict[str, str]) -> list[dict[str, Any]]:
    submission = events.submission
    events.ended("retry", fields=sorted(problems))
    fields = {name: {"error": message} for name, message in problems.items()}
    message = "Some fields need fixing before the connection can be tested."
    listed = "; ".join(f"{name}: {message}" for name, message in problems.items())
    return [
        *events.patch(
            form_error=message,
            status_text=None,
            _is_probing=False,
            **_field_changes(submission, fields),
        ),
        events.text(f"{message} ({listed})\n"),
        events.completed("retry", f"{message} ({listed})", fields=sorted(problems)),
    ]


def _translated(events: ResponseEvents, event: ProbeEvent) -> list[dict[str, Any]]:
    data = event.data
    if event.kind == "status":
        return events.patch(status_text=data["text"])
    if event.kind in ("field_status", "remove_field"):
        change = {"status": data["status"]} if event.kind == "field_status" else None
        return events.patch(**_where(data["method_id"], {data["name"]: change}))
    if event.kind == "switch_method":
        method = data["method_id"]  # auth_method too: a client reads the method from it first
        return events.patch(selected_method=method, auth_method=method, status_text=data["reason"])
    if event.kind == "text":
        return [events.text(data["text"])]
    if event.kind == "cell_start":
        return [events.thought("scratchpad.start", pad=PROBE_PAD, **data)]
    if event.kind == "cell_result":
        text = cut_middle(data["text"], CELL_TEXT_CHARS)
        return [
            events.thought("scratchpad.result", pad=PROBE_PAD, ok=data["ok"], text=text),
            events.thought("scratchpad.end", pad=PROBE_PAD, ok=data["ok"]),
        ]
    return []


async def _verdict(
    events: ResponseEvents, verdict: Verdict, vault: Vault, saved: tuple[str, str] | None
) -> list[dict[str, Any]]:
    """The verdict's events, after its vault work (on a worker thread: files and keys)."""
    submission = events.submission
    if verdict.status == "success":
        try:
            connection = await asyncio.to_thread(_keep, submission, vault, saved)
        except ScratchpadError as exc:
            verdict = Verdict("failed", error=f"The connection works but was not saved: {exc}",
                              follow_up="Fix what the message says and submit again.")  # fmt: skip
        else:
            return _success(events, verdict, connection, new=saved is None)
    tested = saved[1] if saved else submission.id
    await asyncio.to_thread(vault.audit.append, "probe", submission.engine, tested)
    if verdict.status == "needs_input":
        return _needs_input(events, verdict)
    return _failure(events, verdict)


def _keep(submission: Submission, vault: Vault, saved: tuple[str, str] | None) -> dict[str, Any]:
    """The connection that works (saved now, unless it was already): its engine, name and
    the variables pads get."""
    engine, name = saved or _save(submission, vault)
    vault.audit.append("probe", engine, name)
    variables = [env_name(engine, name, f) for f in vault.load(engine, name) if f[:1] != "_"]
    return {"engine": engine, "name": name, "variables": variables}


def _save(submission: Submission, vault: Vault) -> tuple[str, str]:
    """A new connection of the submitted values (skipped and empty fields left out)."""
    fields: dict[str, object] = {
        name: value
        for name, value in submission.values.items()
        if value != "" and name not in submission.skipped
    }
    if submission.method_id is not None:
        fields["_auth_method"] = submission.method_id
    secret = [name for name in submission.secret_fields() if name in fields]
    record = vault.add(submission.engine, fields, secret, name=submission.connection_name)
    return str(record["engine"]), str(record["name"])


def _success(
    events: ResponseEvents, verdict: Verdict, connection: dict[str, Any], new: bool
) -> list[dict[str, Any]]:
    events.ended("success", summary=verdict.summary, connection=connection)
    where = f"{connection['engine']}/{connection['name']}"
    text = (
        f"Connected: {verdict.summary} {'Saved as' if new else 'Still works:'} {where}; pads "
        f"get {', '.join(connection['variables'])}."
    )
    return [
        *events.patch(
            _is_success=True,
            _is_probing=False,
            status_text=None,
            form_error=None,
            subtitle=verdict.summary,
            actions=SUCCESS_ACTIONS,
        ),
        events.text("\n" + text + "\n"),
        events.completed("success", text, connection=connection),
    ]


def _failure(events: ResponseEvents, verdict: Verdict) -> list[dict[str, Any]]:
    events.ended("failed", error=verdict.error, follow_up=verdict.follow_up)
    text = f"The connection failed: {verdict.error} {verdict.follow_up}".strip()
    return [
        *events.patch(
            form_error=verdict.error,
            form_warning=verdict.follow_up or None,
            status_text=None,
            _is_probing=False,
        ),
        events.text("\n" + text + "\n"),
        events.completed("failed", text, error=verdict.error, follow_up=verdict.follow_up),
    ]


def _needs_input(events: ResponseEvents, verdict: Verdict) -> list[dict[str, Any]]:
    submission = events.submission
    names = [f["name"] for f in verdict.fields]
    events.ended("needs_input", reason=verdict.reason, fields=names)
    new_fields = {f["name"]: f for f in verdict.fields}
    text = f"More is needed: {verdict.reason} (new fields: {', '.join(names)})"
    return [
        *events.patch(
            subtitle=verdict.reason,
            status_text=None,
            _is_probing=False,
            form_error=None,
            **_where(verdict.method_id or submission.method_id, new_fields),
        ),
        events.text("\n" + text + "\n"),
        events.completed("needs_input", text, reason=verdict.reason, fields=names),
    ]


def _fail(events: ResponseEvents, message: str, exc: Exception) -> list[dict[str, Any]]:
    events.ended("failed", error=message)
    code = type(exc).__name__ if isinstance(exc, ScratchpadError) else "InternalError"
    return [
        *events.patch(form_error=message, status_text=None, _is_probing=False),
        events.failed(message, code),
    ]


def _where(method_id: str | None, fields: dict[str, Any]) -> dict[str, Any]:
    """A patch's changes to fields, at the top level or inside method ``method_id``."""
    if method_id is None:
        return {"fields": fields}
    return {"methods": {method_id: {"fields": fields}}}


def _field_changes(submission: Submission, fields: dict[str, Any]) -> dict[str, Any]:
    """Changes to fields wherever each lives (the shared ones, or the chosen method's)."""
    shared = {f["name"] for f in submission.form.get("fields") or []}
    top = {n: c for n, c in fields.items() if n in shared}
    inner = {n: c for n, c in fields.items() if n not in shared}
    changes: dict[str, Any] = {"fields": top} if top else {}
    if inner and submission.method_id is not None:
        changes["methods"] = {submission.method_id: {"fields": inner}}
    elif inner:
        changes.setdefault("fields", {}).update(inner)
    return changes
