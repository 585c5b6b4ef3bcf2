"""What the cycle calls "the model": anything with ``complete(*, system, user) -> str``,
asynchronous or not.

``reply_of`` asks one: an ``async def complete`` runs on the cycle's event loop, the loop its
tool calls run on (a provider's HTTP client belongs to the loop that uses it); a synchronous
one (the seed's kind) runs on a thread of its own, so the loop's other work (a pad's kernel,
a tool) goes on while it waits; either way the reply must be text. ``ProviderModel`` sends the
prompt to one of the project's LLM providers as one user message; ``ScriptedModel`` replies
from a list and records the prompts, for tests and demos. ``model_from_spec`` builds either
from ``provider:model`` or ``scripted:FILE`` (for an agent, a scripted file is always a list
of replies, wherever the spec comes from).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from scratchpad.errors import LLMError
from scratchpad.llm.messages import Message
from scratchpad.llm.provider import Provider
from scratchpad.llm.scripted import read_json_list

SCRIPTED_PREFIX = "scripted:"


@runtime_checkable
class Model(Protocol):
    """What an agent cycle needs of a model: one prompt in, one reply out."""

    def complete(self, *, system: str, user: str) -> str | Awaitable[str]:
        """The model's reply to one prompt (``async def`` or plain)."""
        ...


async def reply_of(model: Model, *, system: str, user: str) -> str:
    """The model's reply to one prompt, checked to be text. A coroutine function is awaited
    here; anything else is called on a thread (see ``_on_thread``), and what it returns is
    awaited when it is awaitable (a plain function handing back a coroutine)."""
    complete = model.complete
    if inspect.iscoroutinefunction(complete):
        reply: object = await complete(system=system, user=user)
    else:
        reply = await _on_thread(lambda: complete(system=system, user=user))
        if inspect.isawaitable(reply):
            reply = await reply
    if not isinstance(reply, str):
        raise LLMError(
            f"the model's complete() returned {type(reply).__name__}, not text: it must "
            f"return the reply as a str (or be an async def that does)"
        )
    return reply


async def _on_thread(call: Callable[[], object]) -> object:
    """``call()`` on a daemon thread, awaited here. Not ``asyncio.to_thread``: closing the
    cycle's loop waits for its executor, so a model that never answers would hold Ctrl-C;
    a daemon thread is left behind instead (its late answer goes nowhere)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[object] = loop.create_future()

    def settle(result: object, error: BaseException | None) -> None:
        if future.done():  # cancelled meanwhile
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        result: object = None
        error: BaseException | None = None
        try:
            result = call()
        except BaseException as exc:  # handed to the awaiting task, whatever it is
            error = exc
        with contextlib.suppress(RuntimeError):  # a closed loop: the cycle ended without it
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="scratchpad-model", daemon=True).start()
    return await future


class ScriptedModel:
    """Replies with ``replies`` in order; an exception in the list is raised at its turn.

    Every call is recorded in ``prompts`` as ``(system, user)``, so tests can check what the
    model was shown. Running out of replies raises :class:`LLMError`.
    """

    def __init__(self, replies: Sequence[str | BaseException]) -> None:
        self.replies = list(replies)
        self.prompts: list[tuple[str, str]] = []

    @property
    def remaining(self) -> int:
        return len(self.replies) - len(self.prompts)

    async def complete(self, *, system: str, user: str) -> str:
        self.prompts.append((system, user))
        index = len(self.prompts) - 1
        if index >= len(self.replies):
            raise LLMError(
                f"ScriptedModel ran out of replies after {len(self.replies)}; add more replies"
            )
        reply = self.replies[index]
        if isinstance(reply, BaseException):
            raise reply
        return reply

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        """Replies from a JSON list: strings are used as they are, anything else (e.g. an
        object ``{"tool": "done", ...}``) as its JSON text."""
        data = read_json_list(path, "scripted model", "replies")
        return cls([item if isinstance(item, str) else json.dumps(item) for item in data])


class ProviderModel:
    """A provider as a model: the prompt as one user message, the reply's text. It holds
    no loop of its own: it runs on the caller's (the SDK providers keep a client per loop,
    so a cycle after another, each on its own loop, is served)."""

    def __init__(self, provider: Provider, *, max_tokens: int = 4096) -> None:
        self.provider = provider
        self.max_tokens = max_tokens

    async def complete(self, *, system: str, user: str) -> str:
        response = await self.provider.complete(
            system=system, messages=[Message.user(user)], max_tokens=self.max_tokens
        )
        return response.text


def model_from_spec(spec: str | None) -> ScriptedModel | ProviderModel:
    """``scripted:FILE`` (a JSON list of replies) or ``provider:model`` (default: the
    ``SCRATCHPAD_MODEL`` setting) through ``create_provider``. A scripted file is read as
    the agent's replies (objects sent as their JSON text) also when the setting names it,
    not as a provider's turns."""
    if spec and spec.startswith(SCRIPTED_PREFIX):
        return ScriptedModel.from_file(spec.removeprefix(SCRIPTED_PREFIX))
    from scratchpad.config import Settings
    from scratchpad.llm.adapters import create_provider

    settings = Settings.load()
    if not spec and settings.model.startswith(SCRIPTED_PREFIX):
        return ScriptedModel.from_file(settings.model.removeprefix(SCRIPTED_PREFIX))
    provider = create_provider(spec, settings=settings)
    return ProviderModel(provider, max_tokens=settings.max_output_tokens)
