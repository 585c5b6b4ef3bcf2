"""``request_credentials`` for MCP clients: the form on a page of its own, opened through
URL-mode elicitation, so a secret goes from the person's browser to this server and never
through the client or the model.

A call describing a form (checked as the chat's tool checks it) opens a pending form
(:mod:`scratchpad.connect.pending`) and then, by what the client can do:

- it declared URL elicitation (``capabilities.elicitation.url``): the server asks it to open
  the form's link. On a handshake-era connection (2025-11-25) that is an ``elicitation/create``
  request inside the call (the session's back-channel: our streamable HTTP endpoint is
  stateful and answers with SSE, so it has one); on a 2026-07-28 connection, which has no
  back-channel, the call answers ``InputRequiredResult`` with that request and the client
  calls again with the person's answer and the form id as ``request_state``. Accepted: the
  call waits (``SCRATCHPAD_FORM_WAIT_S``, progress notifications meanwhile) for the form's
  outcome and answers the connection's name and ``DS_*`` variable names; declined or
  cancelled: the form is declined.
- it did not: the call answers at once with the link for the person's browser, and how to
  ask later (``{"form_id": ...}`` alone answers the form's status).

The stdio server has no page to link to and does not offer the tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext

from scratchpad.connect.pending import PendingForm, PendingForms
from scratchpad.errors import FormNotFoundError, InvalidInputError
from scratchpad.scrub import scrub
from scratchpad.tools.credentials_tool import REQUEST_NAME, REQUEST_SCHEMA, checked_request
from scratchpad.tools.credentials_tool import variables_hint as expected_variables

log = logging.getLogger(__name__)
NAME = REQUEST_NAME
ELICITATION_KEY = "credentials"
PROGRESS_EVERY_S = 10.0
INPUT_SCHEMA: dict[str, Any] = {
    **REQUEST_SCHEMA,
    "properties": {
        **REQUEST_SCHEMA["properties"],
        "form_id": {
            "type": "string",
            "description": "Alone: how a form you asked for stands (its status and, once "
            "completed, the variable names). With a form: the id to give it (optional).",
        },
    },
    "required": [],
}
DESCRIPTION = (
    "Ask the person for credentials (database passwords, API keys, tokens, service accounts) "
    "through a form on a web page: they type the values into Scratchpad directly, never into "
    "the chat. Use it whenever a task needs credentials that pads do not have yet; never ask "
    "the person to paste a secret into the chat. Describe the form: engine, title, subtitle "
    "(what access and why), fields (type password for secrets), or methods when there are "
    "several ways to sign in; for a known engine you may leave out fields. The connection is "
    "tested and, when it works, saved; pads get it as DS_<ENGINE>_<NAME>__<FIELD> variables. "
    "The result names the variables once the person is done, or gives a one-time link for the "
    'person and a form_id: call again with {"form_id": "..."} alone to learn the outcome.'
)
INSTRUCTIONS = " For credentials, call `request_credentials`; never ask for a secret in the chat."


class CredentialsTool:
    """The tool over a server's pending forms; ``link_for(form_id)`` is the absolute URL of a
    one-time link to the form's page."""

    def __init__(
        self, forms: PendingForms, link_for: Callable[[str], str], *, wait_s: float
    ) -> None:
        self.forms = forms
        self.link_for = link_for
        self.wait_s = wait_s

    def tool(self) -> types.Tool:
        return types.Tool(name=NAME, description=DESCRIPTION, input_schema=INPUT_SCHEMA)

    async def call(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        arguments = params.arguments or {}
        if params.request_state is not None:  # a 2026-07-28 client, back with the answer
            return await self._resumed(ctx, params.request_state, params.input_responses)
        if set(arguments) == {"form_id"}:
            return self._status(arguments["form_id"])
        try:
            form = self.forms.open(checked_request(arguments))
        except InvalidInputError as exc:
            return result(f"The form was not opened: {exc}. Fix it and call {NAME} again.", True)
        url = self.link_for(form.form_id)
        if not takes_url(ctx):
            return self._link(form, url)
        if ctx.session.can_send_request:
            return await self._elicited(ctx, form, url)
        request = types.ElicitRequest(
            params=types.ElicitRequestURLParams(message=elicit_message(form.spec), url=url)
        )
        return types.InputRequiredResult(
            input_requests={ELICITATION_KEY: request}, request_state=form.form_id
        )

    async def _elicited(
        self, ctx: ServerRequestContext[Any], form: PendingForm, url: str
    ) -> types.CallToolResult:
        """The handshake era: ask the client to open the link, inside this call."""
        try:
            with anyio.fail_after(self.wait_s):
                answer = await ctx.session.elicit_url(
                    elicit_message(form.spec), url, form.form_id, related_request_id=ctx.request_id
                )
        except Exception as exc:  # a client that cannot open it: the person gets the link
            log.info("URL elicitation of form %s failed (%s); the link instead", form.form_id, exc)
            return self._link(form, url)
        if answer.action != "accept":
            self.forms.decline(form.form_id)
            return self._answer(form)
        await self._waited(ctx, form)
        if form.status == "completed":
            try:
                await ctx.session.send_elicit_complete(form.form_id, ctx.request_id)
            except Exception:  # the notification is a courtesy; the answer follows anyway
                log.info("elicitation-complete of form %s was not sent", form.form_id)
        return self._answer(form)

    async def _resumed(
        self,
        ctx: ServerRequestContext[Any],
        form_id: str,
        responses: dict[str, Any] | None,
    ) -> types.CallToolResult:
        """The 2026-07-28 era: the client's second call, with the person's answer."""
        try:
            form = self.forms.get(form_id)
        except FormNotFoundError as exc:
            return result(str(exc), True)
        answer = (responses or {}).get(ELICITATION_KEY)
        if not isinstance(answer, types.ElicitResult) or answer.action != "accept":
            self.forms.decline(form.form_id)
            return self._answer(form)
        await self._waited(ctx, form)
        return self._answer(form)

    async def _waited(self, ctx: ServerRequestContext[Any], form: PendingForm) -> None:
        """Until the form has ended or the wait is over, with a progress note now and then."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        count = 0
        while form.status == "open" and (left := self.wait_s - (loop.time() - start)) > 0:
            count += 1
            waited = round(loop.time() - start)
            note = f"Waiting for the person to fill in the form ({waited}s of {self.wait_s:g}s)"
            with contextlib.suppress(Exception):  # a client gone away must not end the wait
                await ctx.session.report_progress(count, None, note)
            try:
                await self.forms.wait(form.form_id, min(PROGRESS_EVERY_S, left))
            except FormNotFoundError:
                return

    def _status(self, form_id: object) -> types.CallToolResult:
        if not isinstance(form_id, str):
            return result(f'form_id must be the text id {NAME} gave, e.g. "fm_3f9a1c2b7d".', True)
        try:
            form = self.forms.get(form_id)
        except FormNotFoundError as exc:
            return result(str(exc), True)
        if form.status == "open":
            return result(
                f"Form {form.form_id} is still open: the person has not filled it in with "
                "credentials that work yet. Ask again later; do not ask for the secret in the "
                "chat."
            )
        return self._answer(form)

    def _answer(self, form: PendingForm) -> types.CallToolResult:
        """What the model learns of a form: its outcome, names only."""
        fid = form.form_id
        if form.status == "completed" and form.connection is not None:
            c = form.connection
            return result(
                f"The person filled in form {fid} and the connection works: saved as "
                f"{c['engine']}/{c['name']}. Pads get {', '.join(c['variables'])}; read them "
                "from os.environ in a pad and never print them."
            )
        if form.status == "declined":
            return result(
                f"The person declined form {fid}; nothing was saved. Do not ask for the secret "
                f"in the chat: ask how they want to go on, or call {NAME} again if they agree."
            )
        if form.status == "expired":
            return result(f"Form {fid} expired before it was filled in; call {NAME} again.")
        return result(
            f"Form {fid} is still open: the person has not finished it within "
            f'{self.wait_s:g}s. Call {NAME} with {{"form_id": "{fid}"}} alone to learn how '
            "it stands; do not ask for the secret in the chat."
        )

    def _link(self, form: PendingForm, url: str) -> types.CallToolResult:
        fid, engine = form.form_id, form.spec["engine"]
        return result(
            f"Give the person this link, to open in their own browser (it works once): {url}\n"
            f"There they type the {engine} credentials directly into Scratchpad; you never see "
            "them, so do not ask for them in the chat. The connection is tested before it is "
            f'saved. To learn the outcome, call {NAME} with {{"form_id": "{fid}"}} alone: it '
            "answers the form's status and, once it is completed, the variable names "
            f"({expected_variables(form.spec)}, <NAME> being the saved connection's name)."
        )


def takes_url(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the client declared URL-mode elicitation."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and elicitation.url is not None


def elicit_message(spec: dict[str, Any]) -> str:
    """What the person reads before opening the link: what is asked, and why."""
    fields = [f for f in spec.get("fields") or []]
    for method in spec.get("methods") or []:
        fields += method.get("fields") or []
    asked = ", ".join(dict.fromkeys(str(f.get("label") or f["name"]) for f in fields))
    why = f" {spec['subtitle']}" if spec.get("subtitle") else ""
    return scrub(
        f"{spec['title']}.{why} The assistant asks for {spec['engine']} credentials"
        f"{f' ({asked})' if asked else ''}. Open the page to type them directly into "
        "Scratchpad: they never pass through the assistant, and they are tested before they "
        "are saved."
    )


def result(text: str, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=scrub(text))], is_error=is_error)
