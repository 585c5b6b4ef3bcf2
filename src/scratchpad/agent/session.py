"""The session loop: a model calls tools, round after round, until it answers in text.

One turn: gc the observation store, add the user's message, then repeat — send the history
and the offered tools, append the reply, run each tool call (references resolved first) and
append all results as one message — until a reply has no tool calls. A round cap forces a
wrap-up; repeated failures of one tool get a hint, then a stop.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from scratchpad.agent.events import EventBus, SessionEvent, Subscriber
from scratchpad.agent.persistence import Scrub, SessionFiles
from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError, LLMNoReplyError, ObservationError
from scratchpad.llm.messages import (
    Complete,
    ImageBlock,
    Message,
    Response,
    TextBlock,
    TextDelta,
    ToolCall,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from scratchpad.llm.provider import Provider
from scratchpad.observations.store import ObservationStore
from scratchpad.padnames import SAFE_NAME
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.scrub import scrub as default_scrub
from scratchpad.tools import (
    ScratchpadObserver,
    ToolOutcome,
    ToolRegistry,
    ToolSessionContext,
    builtin_registry,
)
from scratchpad.vault.sources import register_process_secrets

HINT_AFTER = 2
STOP_AFTER = 5
CAP_NOTE = (
    "[system] The tool-round cap ({cap}) is reached: no more tools this turn. Summarise "
    "where you stand, what is done and what is left."
)
CAP_REACHED = "(The tool-round cap was reached.)"
EMPTY_REPLY = "(empty reply)"


class Session:
    """A conversation between a user, a model and the tools. ``history`` holds it all.

    With ``persist`` (the default) the history is saved and restored per ``session_id`` and
    tool calls go to an episodic log under ``<home>/sessions/``; without it the session has
    no id and keeps nothing on disk (a throwaway session, such as a probe's).
    """

    def __init__(
        self,
        *,
        provider: Provider,
        manager: ScratchpadManager | None = None,
        store: ObservationStore | None = None,
        system: str = "",
        registry: ToolRegistry | None = None,
        settings: Settings | None = None,
        session_id: str | None = None,
        observers: Sequence[ScratchpadObserver] = (),
        scrub: Scrub | None = None,
        persist: bool = True,
    ) -> None:
        self.settings = settings or (manager.settings if manager else Settings.load())
        self.provider = provider
        self.manager = manager
        self.store = store
        self.system = system
        self.registry = registry or builtin_registry(manager, store)
        self.session_id = _session_id(session_id, persist)
        register_process_secrets(self.settings)
        self.scrub = scrub or default_scrub
        self.files: SessionFiles | None = None
        if self.session_id is not None:
            directory = self.settings.home / "sessions"
            self.files = SessionFiles(directory, self.session_id, self.scrub)
        self.history: list[Message] = self.files.load_history() if self.files else []
        self.usage = Usage()  # of the last turn
        self._bus = EventBus()
        self._observers = list(observers)
        self._streak: tuple[str, int] = ("", 0)
        self._blocked: set[str] = set()

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        return self._bus.subscribe(subscriber)

    async def turn(self, text: str) -> str:
        """Run one user turn to its end; the model's final text."""
        final = ""
        async for event in self.turn_stream(text):
            if event.kind == "turn_end":
                final = str(event.data["text"])
        return final

    async def turn_stream(self, text: str) -> AsyncGenerator[SessionEvent, None]:
        """The events of one turn as they happen, ending with ``turn_end``."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError("a turn needs a non-empty user message")
        queue: asyncio.Queue[SessionEvent | None] = asyncio.Queue()
        task = asyncio.get_running_loop().create_task(self._run_turn(text, queue.put_nowait))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            task.result()  # re-raise what ended the turn early
        finally:
            if not task.done():
                task.cancel()
                if self.manager is not None:
                    await self.manager.cancel_all_running()
                await asyncio.gather(task, return_exceptions=True)  # its cleanup, history save

    # -- the loop ---------------------------------------------------------------------------
    async def _run_turn(self, text: str, sink: Callable[[SessionEvent], None]) -> None:
        def emit(kind: str, **data: Any) -> None:
            event = SessionEvent(kind, data)
            sink(event)
            self._bus.emit(event)

        context = self._context(emit)
        if self.store is not None:
            self.store.gc()
        self._repair_history(emit)
        self.history.append(Message.user(text))
        self.usage = Usage()
        self._streak, self._blocked = ("", 0), set()
        rounds = 0
        try:
            while True:
                wrap_up = rounds >= self.settings.max_tool_rounds
                response = await self._ask(context, emit, tools_allowed=not wrap_up)
                self.history.append(_assistant_message(response))
                if not response.tool_calls:
                    emit("turn_end", text=response.text, usage=self.usage)
                    return
                if wrap_up:  # the model called tools anyway: answer them, end with its text
                    self.history.append(self._unrun(response.tool_calls, "round cap reached"))
                    self.history.append(Message.assistant(response.text or CAP_REACHED))
                    emit("turn_end", text=response.text, usage=self.usage)
                    return
                rounds += 1
                truncated = response.stop_reason == "max_tokens"
                results = await self._run_calls(response.tool_calls, context, emit, truncated)
                if rounds >= self.settings.max_tool_rounds:
                    emit("cap_exhausted", rounds=rounds)
                    cap = self.settings.max_tool_rounds
                    results = Message(
                        "user", (*results.content, TextBlock(CAP_NOTE.format(cap=cap)))
                    )
                self.history.append(results)
        finally:
            if self.files is not None:
                self.files.save_history(self.history)

    async def _ask(
        self, context: ToolSessionContext, emit: Any, *, tools_allowed: bool
    ) -> Response:
        # Past the cap the tools stay declared (a history with tool blocks needs them) but
        # the model may not call them.
        offered = self.registry.offered(context)
        system = "\n\n".join(
            part for part in (self.system, *self.registry.prompt_fragments()) if part
        )
        response: Response | None = None
        async for event in self.provider.stream(
            system=system,
            messages=list(self.history),
            tools=[tool.spec() for tool in offered],
            tool_choice=None if tools_allowed or not offered else {"type": "none"},
            max_tokens=self.settings.max_output_tokens,
        ):
            if isinstance(event, TextDelta):
                emit("text_delta", text=event.text)
            elif isinstance(event, Complete):
                response = event.response
        if response is None:
            raise LLMNoReplyError(
                f"the provider {self.provider.name} ended without a reply; try the turn again"
            )
        self.usage = self.usage + response.usage
        return response

    async def _run_calls(
        self, calls: Sequence[ToolCall], context: ToolSessionContext, emit: Any, truncated: bool
    ) -> Message:
        results: list[ToolResultBlock] = []
        for call in calls:
            context.step_num += 1
            emit("tool_call", id=call.id, name=call.name, input=call.input, step=context.step_num)
            self._log("tool_call", name=call.name, step=context.step_num, input=call.input)
            outcome = await self._run_call(call, context, truncated)
            outcome = self._track_failures(call.name, outcome)
            blocks = _scrubbed(outcome, self.scrub)
            shown = "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
            images = [b for b in blocks if isinstance(b, ImageBlock)]
            emit(
                "tool_result", id=call.id, name=call.name, ok=outcome.ok, text=shown, images=images
            )
            self._log("tool_result", name=call.name, ok=str(outcome.ok), result=shown)
            results.append(ToolResultBlock(call.id, blocks, is_error=not outcome.ok))
        return Message("user", tuple(results))

    async def _run_call(
        self, call: ToolCall, context: ToolSessionContext, truncated: bool
    ) -> ToolOutcome:
        if call.repaired and truncated:
            return ToolOutcome(
                f"Your call to {call.name} was cut off at the output limit, so it was not run "
                "(half a program is worse than none). Send it again, shorter if need be.",
                ok=False,
                reason="truncated",
            )
        if call.parse_error:
            return ToolOutcome(
                f"Your call to {call.name} could not be read ({call.parse_error}); it was not "
                "run. Send the call again with complete, valid JSON arguments.",
                ok=False,
                reason="parse_error",
            )
        if call.name in self._blocked:
            return ToolOutcome(
                f"{call.name} failed {STOP_AFTER} times in a row and is not run again this "
                "turn. Answer with what you have, or explain what is blocking you.",
                ok=False,
                reason="failure_streak",
            )
        tool_input: Any = call.input
        if self.store is not None:
            try:
                tool_input = self.store.resolve_references(call.input, turn_id=context.turn_id)
            except ObservationError as exc:
                return ToolOutcome(f"{call.name} was not run: {exc}", ok=False, reason="reference")
        return await self.registry.dispatch(call.name, tool_input, context)

    def _track_failures(self, name: str, outcome: ToolOutcome) -> ToolOutcome:
        if outcome.ok:
            self._streak = ("", 0)
            return outcome
        count = self._streak[1] + 1 if self._streak[0] == name else 1
        self._streak = (name, count)
        if count >= STOP_AFTER:
            self._blocked.add(name)
            note = f"{name} has now failed {count} times in a row: stop retrying it this turn."
        elif count >= HINT_AFTER:
            note = (
                f"{name} failed {count} times in a row. Read the error above and change "
                "the approach instead of repeating the same call."
            )
        else:
            return outcome
        return ToolOutcome([*outcome.blocks(), TextBlock(f"[hint] {note}")], False, outcome.reason)

    # -- helpers ----------------------------------------------------------------------------
    def _log(self, kind: str, **fields: Any) -> None:
        """One line of the episodic log, when the session keeps one."""
        if self.files is not None:
            self.files.log(kind, **fields)

    def _context(self, emit: Any) -> ToolSessionContext:
        if self.manager is None:
            raise InvalidInputError("this session has no ScratchpadManager; pass manager=...")

        def forward(kind: str, data: dict[str, Any]) -> None:
            emit(kind, **data)

        return ToolSessionContext(
            manager=self.manager,
            store=self.store,
            turn_id=secrets.token_hex(8),
            observers=self._observers,
            on_event=forward,
            on_progress=lambda message: emit("tool_progress", message=message),
            scrub=self.scrub,
        )

    def _repair_history(self, emit: Any) -> None:
        """Make an interrupted history valid again before a new turn starts."""
        if not self.history:
            return
        last = self.history[-1]
        pending = [b for b in last.content if isinstance(b, ToolUseBlock)]
        if last.role == "assistant" and pending:
            calls = [ToolCall(b.name, b.input, b.id) for b in pending]
            self.history.append(self._unrun(calls, "the previous turn was interrupted"))
            self.history.append(Message.assistant("(The previous turn was interrupted.)"))
            emit("history_repair", unanswered_calls=len(pending))
        elif last.role == "user":
            self.history.append(Message.assistant("(No reply: the previous turn was interrupted.)"))
            emit("history_repair", unanswered_calls=0)

    @staticmethod
    def _unrun(calls: Sequence[ToolCall], why: str) -> Message:
        return Message(
            "user",
            tuple(
                ToolResultBlock(call.id, (TextBlock(f"Not run: {why}."),), is_error=True)
                for call in calls
            ),
        )


def _session_id(value: str | None, persist: bool) -> str | None:
    """The id of a persisted session (``value``, else a new one): ids name files, so they
    must be plain names (see scratchpad.padnames). A session that keeps nothing has none."""
    if not persist:
        if value is not None:
            raise InvalidInputError(
                f"session_id {value!r} names saved history, but this session has "
                "persist=False and saves nothing: drop session_id, or drop persist=False"
            )
        return None
    value = value or secrets.token_hex(8)
    if isinstance(value, str) and SAFE_NAME.fullmatch(value):
        return value
    raise InvalidInputError(
        f"invalid session id {value!r}: use 1-64 letters, digits, '_', '.', '-', "
        "starting with a letter or digit"
    )


def _assistant_message(response: Response) -> Message:
    """The reply as history keeps it: APIs refuse empty messages and empty text blocks."""
    blocks = tuple(b for b in response.content if not (isinstance(b, TextBlock) and not b.text))
    return Message("assistant", blocks or (TextBlock(EMPTY_REPLY),))


def _scrubbed(outcome: ToolOutcome, scrub: Scrub) -> tuple[TextBlock | ImageBlock, ...]:
    return tuple(
        TextBlock(scrub(block.text)) if isinstance(block, TextBlock) else block
        for block in outcome.blocks()
    )
