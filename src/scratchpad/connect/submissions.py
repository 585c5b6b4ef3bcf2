"""Submitted credential forms, staged in memory only until their probe has run.

A submission is what a person typed into a credential form: the form as it was on screen, the
values and the fields they skipped. It lives in this process only (never on disk, never
logged; a restart forgets it) under ``sub_`` + 12 hex characters. Its values are dropped as
soon as its probe ends (the form keeps them on screen for a resubmission); its metadata
stays for ``SUBMISSION_TTL_S`` so a client that lost the stream can still ask how it ended.
Expired submissions are purged lazily, on the next stage or lookup; past ``MAX_ENDED`` ended
ones, the oldest go first.

Checking here is about the request's shape (a value for a field the form does not have, a
value that is not text): those are the caller's mistakes. Whether a value is acceptable
(required fields, a port that is a number) is the engine's check, which the person fixes in
the form (:func:`scratchpad.vault.engines.shape_problems`).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scratchpad.errors import InvalidInputError, SubmissionNotFoundError
from scratchpad.vault.forms import check_spec, fields_of, is_secret_field, method_of
from scratchpad.vault.names import check_name
from scratchpad.vault.records import MAX_VALUE_CHARS

SUBMISSION_TTL_S = 24 * 3600.0
MAX_STAGED = 256  # waiting or being probed at once (with MAX_SUBMISSION_CHARS: memory bound)
MAX_ENDED = 1024  # ended ones kept for their status (the oldest go first)
LIVE = ("staged", "probing")
MAX_SUBMISSION_CHARS = 256 * 1024
ID_PREFIX = "sub_"
Status = str  # staged | probing | success | needs_input | retry | failed


@dataclass
class Submission:
    """One staged submission. ``values`` is empty once its probe has ended."""

    id: str
    form: dict[str, Any]
    values: dict[str, str] = field(repr=False)
    skipped: tuple[str, ...]
    conversation_id: str | None
    created_at: float
    expires_at: float  # on the store's clock
    status: Status = "staged"
    outcome: dict[str, Any] = field(default_factory=dict)  # names and texts, never values
    connection_name: str | None = None  # what a success is saved as (else the next number)

    @property
    def engine(self) -> str:
        return str(self.form["engine"])

    @property
    def form_id(self) -> str:
        return str(self.form["form_id"])

    @property
    def method_id(self) -> str | None:
        method = method_of(self.form)
        return None if method is None else str(method["id"])

    def fields(self) -> list[dict[str, Any]]:
        """The fields of the form that apply (the chosen method's, with the shared ones)."""
        return fields_of(self.form, self.method_id)

    def secret_fields(self) -> list[str]:
        return [f["name"] for f in self.fields() if is_secret_field(f)]

    def filled(self) -> list[str]:
        return [name for name, value in self.values.items() if value != ""]

    def describe(self) -> dict[str, Any]:
        """Metadata and field names: what may be shown to anyone (never a value)."""
        names = [f["name"] for f in self.fields()]
        return {
            "id": self.id,
            "form_id": self.form_id,
            "conversation_id": self.conversation_id,
            "engine": self.engine,
            "method": self.method_id,
            "fields": names,
            "skipped": list(self.skipped),
            "connection_name": self.connection_name,
            "status": self.status,
            "created_at": self.created_at,
            "outcome": dict(self.outcome),
        }

    def forget_values(self) -> None:
        self.values = {}


class Submissions:
    """The staged submissions of a process (a server has one)."""

    def __init__(
        self, *, ttl_s: float = SUBMISSION_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._items: dict[str, Submission] = {}
        self._lock = threading.Lock()

    def stage(
        self,
        form_spec: object,
        values: object,
        skipped: object = (),
        *,
        form_id: object = None,
        conversation_id: object = None,
        connection_name: object = None,
    ) -> Submission:
        """Check and keep a submission; InvalidInputError says what is wrong with it.
        ``connection_name``: what the connection is saved as when its probe succeeds (a
        vault name; taken by then, the first free ``NAME-2``, ``NAME-3``...)."""
        form = _checked_form(form_spec, form_id)
        if conversation_id is not None and not isinstance(conversation_id, str):
            raise InvalidInputError("conversation_id must be text when given")
        if connection_name == "":
            connection_name = None  # an empty name field: the next number
        if connection_name is not None:
            check_name(connection_name, "connection name")
        submission = Submission(
            id=ID_PREFIX + secrets.token_hex(6),
            form=form,
            values={},
            skipped=(),
            conversation_id=conversation_id,
            created_at=time.time(),
            expires_at=self._clock() + self.ttl_s,
            connection_name=connection_name if isinstance(connection_name, str) else None,
        )
        names = [f["name"] for f in submission.fields()]
        submission.values = _checked_values(values, names)
        submission.skipped = tuple(_checked_skipped(skipped, names))
        with self._lock:
            self._purge()
            if sum(s.status in LIVE for s in self._items.values()) >= MAX_STAGED:
                raise InvalidInputError(
                    f"{MAX_STAGED} submissions are waiting or being probed; submit again when "
                    "one of their probes has ended"
                )
            self._items[submission.id] = submission
        return submission

    def get(self, submission_id: object) -> Submission:
        with self._lock:
            self._purge()
            found = self._items.get(submission_id) if isinstance(submission_id, str) else None
        if found is None:
            raise SubmissionNotFoundError(
                f"no staged submission {submission_id!r}: it is unknown, expired (after "
                f"{self.ttl_s / 3600:g} h) or the server restarted; submit the form again"
            )
        return found

    def __len__(self) -> int:
        with self._lock:
            self._purge()
            return len(self._items)

    def _purge(self) -> None:
        now = self._clock()
        for key in [k for k, s in self._items.items() if s.expires_at <= now]:
            del self._items[key]
        ended = [k for k, s in self._items.items() if s.status not in LIVE]
        for key in ended[: max(0, len(ended) - MAX_ENDED)]:  # the oldest first
            del self._items[key]


def _checked_form(form_spec: object, form_id: object) -> dict[str, Any]:
    if not isinstance(form_spec, Mapping):
        raise InvalidInputError("form_spec must be the form object as it was on screen")
    spec = dict(form_spec)
    if form_id is not None:
        if "form_id" in spec and spec["form_id"] != form_id:
            raise InvalidInputError(
                f"form_id {form_id!r} is not the form_spec's ({spec['form_id']!r}); send the "
                "spec of the form that was submitted"
            )
        spec["form_id"] = form_id
    try:
        form = check_spec(spec)
    except InvalidInputError as exc:
        raise InvalidInputError(f"form_spec: {exc}") from None
    if form.get("methods") and method_of(form) is None:
        ids = ", ".join(str(m["id"]) for m in form["methods"])
        raise InvalidInputError(
            f"the form has several methods ({ids}): say which was used with auth_method"
        )
    return form


def _checked_values(values: object, names: list[str]) -> dict[str, str]:
    if not isinstance(values, Mapping):
        raise InvalidInputError("values must be an object of field name → text")
    checked: dict[str, str] = {}
    for name, value in values.items():
        if name not in names:
            known = ", ".join(names) or "none"
            raise InvalidInputError(f"values.{name}: the form has no such field (fields: {known})")
        checked[name] = _text(name, value)
    if sum(len(v) for v in checked.values()) > MAX_SUBMISSION_CHARS:
        raise InvalidInputError(
            f"the values hold more than {MAX_SUBMISSION_CHARS // 1024} KiB of text together; "
            "a credential is smaller than that"
        )
    return checked


def _text(name: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str):
        kind = "null" if value is None else type(value).__name__
        raise InvalidInputError(f"values.{name} must be text, not {kind}")
    if len(value) > MAX_VALUE_CHARS:
        raise InvalidInputError(f"values.{name} is longer than {MAX_VALUE_CHARS // 1024} KiB")
    if "\0" in value or any("\ud800" <= char <= "\udfff" for char in value):
        raise InvalidInputError(f"values.{name} holds a NUL or an unpaired surrogate")
    return value


def _checked_skipped(skipped: object, names: Iterable[str]) -> list[str]:
    if skipped is None:
        return []
    if isinstance(skipped, str) or not isinstance(skipped, Iterable):
        raise InvalidInputError("skipped must be a list of field names")
    known = set(names)
    listed = list(skipped)
    for name in listed:
        if name not in known:
            raise InvalidInputError(f"skipped: the form has no field {name!r}")
    return list(dict.fromkeys(listed))
