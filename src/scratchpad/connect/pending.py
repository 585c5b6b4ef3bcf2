"""Forms a model asked for and a person has not filled in yet, in this process's memory.

An MCP client has no form panel: the server keeps the form the model described (checked, under
its ``form_id``) and shows it on a page of its own (``/connect/{form_id}``). The page submits
against the stored spec, never against one it sends, so a page cannot widen the model's form.
A form is ``open`` until a submission of it succeeds (``completed``, with the connection's
engine, name and ``DS_*`` variable names: never a value), the person declines it in their MCP
client (``declined``), or its time runs out (``expired``). Whoever waits on a form
(:meth:`PendingForms.wait`) learns its outcome as soon as it has one.

Open forms live ``FORM_TTL_S``; ended ones are kept as long again so a late status question
still has an answer, at most ``MAX_ENDED`` of them (the oldest go first). Purging is lazy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from scratchpad.errors import FormClosedError, FormNotFoundError, InvalidInputError
from scratchpad.text import cut_middle
from scratchpad.vault.forms import PATCH_BLOCK as PATCH
from scratchpad.vault.forms import check_spec, find_blocks, merge_patch

log = logging.getLogger(__name__)

FORM_TTL_S = 24 * 3600.0
MAX_OPEN = 256
MAX_ENDED = 1024
Status = Literal["open", "completed", "declined", "expired"]
CHOICES = ("auth_method", "selected_method")  # what a page may choose on a stored form


@dataclass
class PendingForm:
    """One form the model asked for. ``connection`` is set once it is completed."""

    form_id: str
    spec: dict[str, Any]
    created_at: float  # wall clock, for people
    expires_at: float  # on the store's clock
    status: Status = "open"
    connection: dict[str, Any] | None = None
    _waiters: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def describe(self) -> dict[str, Any]:
        """What the page and the model may see: the spec, the status, the connection's names."""
        return {
            "form_id": self.form_id,
            "spec": self.spec,
            "status": self.status,
            "connection": self.connection,
        }


class PendingForms:
    """The pending forms of a server."""

    def __init__(
        self, *, ttl_s: float = FORM_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._items: dict[str, PendingForm] = {}
        self._lock = threading.Lock()

    def open(self, spec: object) -> PendingForm:
        """Check ``spec`` and keep it as an open form; InvalidInputError says what is wrong."""
        checked = check_spec(spec)
        form = PendingForm(
            form_id=checked["form_id"],
            spec=checked,
            created_at=time.time(),
            expires_at=self._clock() + self.ttl_s,
        )
        with self._lock:
            self._purge()
            if form.form_id in self._items:
                raise InvalidInputError(
                    f"form_id {form.form_id!r} is already in use; leave form_id out to get a "
                    "new one"
                )
            if sum(f.status == "open" for f in self._items.values()) >= MAX_OPEN:
                raise InvalidInputError(
                    f"{MAX_OPEN} forms are waiting for a person already; ask again when one of "
                    "them is filled in or has expired"
                )
            self._items[form.form_id] = form
        return form

    def get(self, form_id: object) -> PendingForm:
        with self._lock:
            self._purge()
            found = self._items.get(form_id) if isinstance(form_id, str) else None
        if found is None:
            shown = cut_middle(repr(form_id), 80)
            raise FormNotFoundError(
                f"no pending form {shown}: it is unknown, ended more than "
                f"{self.ttl_s / 3600:g} h ago, or the server restarted; call "
                "request_credentials again"
            )
        return found

    def waiting(self) -> list[dict[str, Any]]:
        """The open forms, newest first, as a list shows them: id, title, engine, when asked
        for and until when (wall clock, epoch seconds)."""
        with self._lock:
            self._purge()
            found = [f for f in self._items.values() if f.status == "open"]
        found.sort(key=lambda form: form.created_at, reverse=True)
        return [
            {
                "form_id": form.form_id,
                "title": str(form.spec.get("title") or form.spec.get("engine") or form.form_id),
                "engine": form.spec.get("engine"),
                "created_at": form.created_at,
                "expires_at": form.created_at + self.ttl_s,
            }
            for form in found
        ]

    def knows(self, form_id: object) -> bool:
        try:
            self.get(form_id)
        except FormNotFoundError:
            return False
        return True

    def submission_spec(self, form_id: str, sent: Mapping[str, Any]) -> dict[str, Any]:
        """The spec a submission of an open form is checked against: the stored one, with
        only the page's choice of method taken from what it ``sent``."""
        form = self.get(form_id)
        if form.status != "open":
            raise FormClosedError(
                f"form {form_id!r} is {form.status}; it takes no more submissions (the model "
                "can ask for a new one with request_credentials)"
            )
        spec = dict(form.spec)
        methods = {m["id"] for m in spec.get("methods") or []}
        for key in CHOICES:
            if sent.get(key) in methods:
                spec[key] = sent[key]
        return spec

    def complete(self, form_id: str, connection: Mapping[str, Any]) -> None:
        """A submission of the form worked and was saved as ``connection`` (names only)."""
        names = {k: connection[k] for k in ("engine", "name", "variables") if k in connection}
        self._end(form_id, "completed", names)

    def decline(self, form_id: str) -> None:
        """The person declined the form where the model asked for it."""
        self._end(form_id, "declined", None)

    def extend(self, form_id: str, patch: Mapping[str, Any]) -> None:
        """Fields the probe asked for, added to the stored form (so the next submission may
        fill them in); only ``fields`` and ``methods`` of ``patch`` are taken."""
        change = {k: patch[k] for k in ("fields", "methods") if k in patch}
        with self._lock:
            form = self._items.get(form_id)
            if form is None or form.status != "open" or not change:
                return
            form.spec = check_spec(merge_patch(form.spec, change))

    async def wait(self, form_id: str, timeout_s: float) -> PendingForm:
        """The form once it has ended, or as it is after ``timeout_s`` (then still open)."""
        loop = asyncio.get_running_loop()
        ended = asyncio.Event()

        def wake() -> None:
            loop.call_soon_threadsafe(ended.set)

        form = self.get(form_id)
        with self._lock:
            form._waiters.append(wake)
            done = form.status != "open"
        try:
            if not done:
                remaining = min(timeout_s, max(0.0, form.expires_at - self._clock()))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ended.wait(), remaining)
        finally:
            with self._lock:
                if wake in form._waiters:
                    form._waiters.remove(wake)
                self._purge()  # an open form whose time ran out is expired now
        return form

    async def follow(
        self, form_id: str, events: AsyncIterator[dict[str, Any]]
    ) -> AsyncIterator[dict[str, Any]]:
        """A submission's events, passed on as they come: a success completes the form, and
        the fields a ``needs_input`` verdict asks for (its last patch) are added to it."""
        last_patch: dict[str, Any] = {}
        async for event in events:
            if event.get("type") == "response.output_text.delta":
                patches = [b for kind, b in find_blocks(event.get("delta", "")) if kind == PATCH]
                last_patch = patches[-1] if patches else last_patch
            elif event.get("type") == "response.completed":
                self._ended(form_id, event.get("response") or {}, last_patch)
            yield event

    def _ended(self, form_id: str, response: dict[str, Any], patch: dict[str, Any]) -> None:
        if response.get("status") == "success" and response.get("connection"):
            self.complete(form_id, response["connection"])
        elif response.get("status") == "needs_input":
            try:
                self.extend(form_id, patch)
            except InvalidInputError:  # the probe's fields were checked; keep the form as is
                log.warning("fields asked for form %s were not added to it", form_id)

    def _end(self, form_id: str, status: Status, connection: dict[str, Any] | None) -> None:
        with self._lock:
            form = self._items.get(form_id)
            if form is None or form.status != "open":
                return
            form.status = status
            form.connection = connection
            form.expires_at = self._clock() + self.ttl_s  # kept as long again, for its status
            waiters = list(form._waiters)
        for wake in waiters:
            wake()

    def _purge(self) -> None:
        now = self._clock()
        for key, form in list(self._items.items()):
            if form.expires_at > now:
                continue
            if form.status == "open":  # its time ran out: kept as long again, as expired
                form.status, form.expires_at = "expired", now + self.ttl_s
                for wake in form._waiters:
                    wake()
            else:
                del self._items[key]
        ended = [k for k, f in self._items.items() if f.status != "open"]
        for key in ended[: max(0, len(ended) - MAX_ENDED)]:  # the oldest first
            del self._items[key]
