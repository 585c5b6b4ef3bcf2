"""What the cycle calls "the model": anything with ``complete(*, system, user) -> str``.

``ProviderModel`` wraps one of the project's LLM providers (async) behind that synchronous
call; ``ScriptedModel`` replies from a list and records the prompts, for tests and demos.
``model_from_spec`` builds either from ``provider:model`` or ``scripted:FILE``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from scratchpad.errors import ConfigError, LLMError
from scratchpad.llm.messages import Message
from scratchpad.llm.provider import Provider

SCRIPTED_PREFIX = "scripted:"


@runtime_checkable
class Model(Protocol):
    def complete(self, *, system: str, user: str) -> str:
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

    def complete(self, *, system: str, user: str) -> str:
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
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"scripted model {path}: cannot read a JSON list ({exc})") from exc
        if not isinstance(data, list):
            raise ConfigError(f"scripted model {path}: must hold a JSON list of replies")
        return cls([item if isinstance(item, str) else json.dumps(item) for item in data])


class ProviderModel:
    """A provider behind the synchronous ``complete``: one user message, the reply's text.

    The provider's client belongs to one event loop, so this object keeps a private loop for
    its whole life; call ``close()`` when done. Do not call it from inside a running event
    loop (use ``asyncio.to_thread``).
    """

    def __init__(self, provider: Provider, *, max_tokens: int = 4096) -> None:
        self.provider = provider
        self.max_tokens = max_tokens
        self._loop = asyncio.new_event_loop()

    def complete(self, *, system: str, user: str) -> str:
        request = self.provider.complete(
            system=system, messages=[Message.user(user)], max_tokens=self.max_tokens
        )
        return self._loop.run_until_complete(request).text

    def close(self) -> None:
        if not self._loop.is_closed():
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def __enter__(self) -> ProviderModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def model_from_spec(spec: str | None) -> ScriptedModel | ProviderModel:
    """``scripted:FILE`` (a JSON list of replies) or ``provider:model`` (default: the
    ``SCRATCHPAD_MODEL`` setting) through ``create_provider``."""
    if spec and spec.startswith(SCRIPTED_PREFIX):
        return ScriptedModel.from_file(spec[len(SCRIPTED_PREFIX) :])
    from scratchpad.config import Settings
    from scratchpad.llm.adapters import create_provider

    settings = Settings.load()
    provider = create_provider(spec, settings=settings)
    return ProviderModel(provider, max_tokens=settings.max_output_tokens)
