"""The seven tools of a credential probe, besides the scratchpad.

Four of them report progress to the person at the form (a status line, a field's status, a
field removed, another method suggested); three are verdicts (success, failure, more fields
needed). Each call becomes a :class:`ProbeEvent` the moment it is made. Verdicts are kept,
the last one wins: a probe that reports failure and then finds the fix may still succeed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from scratchpad.connect.scrubbing import SubmissionScrubber
from scratchpad.errors import InvalidInputError
from scratchpad.tools.base import ToolDef, ToolOutcome
from scratchpad.vault.forms import check_patch

MAX_TEXT_CHARS = 1000

VerdictStatus = Literal["success", "failed", "needs_input"]


@dataclass(frozen=True, slots=True)
class ProbeEvent:
    """Something the probe did: status, field_status, remove_field, switch_method, text,
    cell_start, cell_result."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Verdict:
    status: VerdictStatus
    summary: str = ""  # success
    error: str = ""  # failed
    follow_up: str = ""  # failed
    reason: str = ""  # needs_input
    fields: tuple[dict[str, Any], ...] = ()  # needs_input: new fields, to append
    method_id: str | None = None  # needs_input: the method they belong to (None: shared)


class ProbeTools:
    """The tools for one probe of one form; ``emit`` receives their events."""

    def __init__(
        self, form: dict[str, Any], emit: Callable[[ProbeEvent], None], scrub: SubmissionScrubber
    ) -> None:
        self.form = form
        self.emit = emit
        self.scrub = scrub
        self.verdict: Verdict | None = None

    def _short(self, value: object) -> str:
        """A text of the probe's, scrubbed, then cut to MAX_TEXT_CHARS (in that order: a cut
        value could no longer be recognised)."""
        text = "" if value is None else self.scrub(str(value)).strip()
        return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "…"

    def tools(self) -> list[ToolDef]:
        return [
            _tool("set_status", "Show the person a one-line status (null or '' clears it).",
                  {"text": _nullable_text("What you are doing now.")}, ["text"],
                  self._set_status),
            _tool("set_field_status", "Show a status under one field, e.g. 'Validating…' "
                  "(status null clears it).",
                  {"name": _text("The field's name."), "status": _nullable_text("The status."),
                   "method_id": _text("The method the field belongs to (multi-method forms).")},
                  ["name", "status"], self._set_field_status),
            _tool("remove_field", "Remove a field the service does not need from the form.",
                  {"name": _text("The field's name."), "method_id": _text("Its method.")},
                  ["name"], self._remove_field),
            _tool("switch_method", "Suggest another of the form's methods; the reason is "
                  "shown to the person.",
                  {"method_id": _text("The method to switch to."),
                   "reason": _text("Why, in one line.")},
                  ["method_id", "reason"], self._switch_method),
            _tool("report_success", "Verdict: the credentials work.",
                  {"summary": _text("What worked, in one line (no values).")}, ["summary"],
                  self._report_success),
            _tool("report_failure", "Verdict: the credentials do not work.",
                  {"error": _text("The diagnosis, for a person (no values)."),
                   "follow_up": _text("One line on what to fix.")},
                  ["error", "follow_up"], self._report_failure),
            _tool("request_extra_field", "Verdict: the service needs fields the form did "
                  "not ask for; they are added to the form and the person submits again.",
                  {"fields": {"type": "array", "items": {"type": "object"},
                              "description": "Field objects: name, label, type (text, "
                              "password, url, select, textarea, boolean), required, help."},
                   "reason": _text("Why they are needed."),
                   "method_id": _text("The method they belong to (multi-method forms).")},
                  ["fields", "reason"], self._request_extra_field),
        ]  # fmt: skip

    # -- progress ---------------------------------------------------------------------------
    async def _set_status(self, _: Any, args: dict[str, Any]) -> str:
        self.emit(ProbeEvent("status", {"text": self._short(args.get("text")) or None}))
        return "Shown."

    async def _set_field_status(self, _: Any, args: dict[str, Any]) -> str:
        method = self._locate(args["name"], args.get("method_id"))
        status = self._short(args.get("status")) or None
        self.emit(ProbeEvent("field_status", {"name": args["name"], "method_id": method,
                                              "status": status}))  # fmt: skip
        return "Shown."

    async def _remove_field(self, _: Any, args: dict[str, Any]) -> str:
        method = self._locate(args["name"], args.get("method_id"))
        self.emit(ProbeEvent("remove_field", {"name": args["name"], "method_id": method}))
        return f"Field {args['name']!r} removed from the form."

    async def _switch_method(self, _: Any, args: dict[str, Any]) -> str:
        method_id = self._method(args["method_id"])
        if method_id is None:
            raise InvalidInputError("method_id must name one of the form's methods")
        self.emit(ProbeEvent("switch_method", {"method_id": method_id,
                                               "reason": self._short(args["reason"])}))  # fmt: skip
        return (
            f"Suggested {method_id!r}. The person must fill that method's fields: end with a "
            "verdict (request_extra_field or report_failure saying so)."
        )

    # -- verdicts ---------------------------------------------------------------------------
    async def _report_success(self, _: Any, args: dict[str, Any]) -> ToolOutcome:
        summary = self._short(args["summary"]) or "The connection works."
        return self._decide(Verdict("success", summary=summary))

    async def _report_failure(self, _: Any, args: dict[str, Any]) -> ToolOutcome:
        error = self._short(args["error"]) or "The connection does not work."
        follow_up = self._short(args["follow_up"])
        return self._decide(Verdict("failed", error=error, follow_up=follow_up))

    async def _request_extra_field(self, _: Any, args: dict[str, Any]) -> ToolOutcome:
        method = self._method(args.get("method_id"))
        fields = args["fields"]
        if not fields or not all(isinstance(f, dict) for f in fields):
            raise InvalidInputError("fields must list at least one field object")
        named = {self._new_name(f.get("name")): f for f in fields}
        checked = check_patch({"form_id": self.form["form_id"], "fields": named})
        new = tuple(
            self.scrub.free_text({**f, "name": n})
            for n, f in checked["fields"].items()
            if f is not None
        )
        reason = self._short(args["reason"]) or "More is needed."
        return self._decide(Verdict("needs_input", reason=reason, fields=new, method_id=method))

    def _new_name(self, name: object) -> str:
        """A field name for a new field: given, not on the form yet, holding no value."""
        if not isinstance(name, str) or not name:
            raise InvalidInputError("every field needs a name")
        if name in self._names():
            raise InvalidInputError(
                f"the form has a field {name!r} already: point at it with set_field_status, "
                "or end with report_failure saying what is wrong with it"
            )
        if self.scrub.holds_value(name):
            raise InvalidInputError("a field name must not hold a submitted value")
        return name

    def _names(self) -> list[str]:
        shared = [f["name"] for f in self.form.get("fields") or []]
        return shared + [n for m in self.form.get("methods") or [] for n in _names(m)]

    def _decide(self, verdict: Verdict) -> ToolOutcome:
        replaced = self.verdict is not None
        self.verdict = verdict
        note = " (it replaces your earlier verdict)" if replaced else ""
        return ToolOutcome(f"Verdict recorded: {verdict.status}{note}. Stop now.")

    # -- the form's names -------------------------------------------------------------------
    def _method(self, method_id: object) -> str | None:
        """The method named (None when none is named); InvalidInputError for an unknown one."""
        if method_id in (None, ""):
            return None
        ids = [m["id"] for m in self.form.get("methods") or []]
        if method_id not in ids:
            raise InvalidInputError(
                f"the form has no method {method_id!r} (methods: {', '.join(ids) or 'none'})"
            )
        return str(method_id)

    def _locate(self, name: str, method_id: object) -> str | None:
        """Where field ``name`` lives: None for the shared fields, else its method's id."""
        method = self._method(method_id)
        shared = [f["name"] for f in self.form.get("fields") or []]
        if method is None and name in shared:
            return None
        for candidate in self.form.get("methods") or []:
            if method in (None, candidate["id"]) and name in _names(candidate):
                return str(candidate["id"])
        known = self._names()
        raise InvalidInputError(
            f"the form has no field {name!r}"
            + (f" in method {method!r}" if method else "")
            + f" (fields: {', '.join(dict.fromkeys(known)) or 'none'})"
        )


def _names(method: dict[str, Any]) -> list[str]:
    return [f["name"] for f in method.get("fields") or []]


def _text(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _nullable_text(description: str) -> dict[str, Any]:
    return {"type": ["string", "null"], "description": description}


def _tool(
    name: str,
    description: str,
    properties: dict[str, Any],
    required: list[str],
    handler: Any,
) -> ToolDef:
    schema = {"type": "object", "properties": properties, "required": required}
    return ToolDef(name, description, schema, handler)
