"""What the cycle calls "the model": anything with ``async complete(*, system, user) -> str``.

The call is async so that it runs on the cycle's event loop, the loop its tool calls run on
(a provider's HTTP client belongs to the loop that uses it). ``ProviderModel`` sends the
prompt to one of the project's LLM providers as one user message; ``ScriptedModel`` replies
from a list and records the prompts, for tests and demos. ``model_from_spec`` builds either
from ``provider:model`` or ``scripted:FILE`` (for an agent, a scripted file is always a list
of replies, wherever the spec comes from).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
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

    async def complete(self, *, system: str, user: str) -> str:
        """The model's reply to one prompt."""
        ...


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
