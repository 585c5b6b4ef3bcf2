"""What the SDK adapters share: retries, error mapping and the streaming skeleton.

An adapter says how to make its SDK client (``_new_client``), build a request (``_params``),
send it (``_create``), read a reply (``_response``), assemble a stream (``_builder``) and name
a failure (``_mapped``). A client's pooled connections belong to the event loop that opened
them (one kept from a closed loop fails), so a provider keeps one client per loop: used from
a new loop (each agent cycle runs on its own) it makes a new client there.
"""

from __future__ import annotations

import asyncio
import importlib
from abc import abstractmethod
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from scratchpad.errors import (
    ConfigError,
    LLMAuthError,
    LLMContextOverflowError,
    LLMError,
    LLMModelUnavailableError,
    LLMRateLimitError,
    LLMTransientError,
)
from scratchpad.llm.messages import Complete, Message, Response, StreamEvent, ToolSpec
from scratchpad.llm.provider import Provider, ToolChoice, with_retries

# What providers say when a request does not fit the context window.
OVERFLOW_WORDS = (
    "too long",
    "context_length",
    "context length",
    "context window",
    "too many tokens",
)


class StreamBuilder(Protocol):
    def feed(self, event: Any) -> list[StreamEvent]: ...

    def finish(self) -> list[StreamEvent]: ...

    def response(self) -> Response: ...


class SDKProvider(Provider):
    retry_budget_s: float = 60.0
    key_variable: str = ""  # the environment variable that holds the API key
    _sdk: Any
    _bound: tuple[asyncio.AbstractEventLoop, Any] | None = None  # (loop, its client)

    @abstractmethod
    def _new_client(self) -> Any:
        """A new SDK client (it opens connections on the loop that first uses it)."""

    @property
    def _client(self) -> Any:
        """The SDK client of the running event loop (a new one for a new loop)."""
        loop = asyncio.get_running_loop()
        if self._bound is None or self._bound[0] is not loop:
            self._bound = (loop, self._new_client())
        return self._bound[1]

    @abstractmethod
    def _params(
        self,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        tool_choice: ToolChoice | None,
        max_tokens: int,
    ) -> dict[str, Any]:
        """The request body in the provider's wire format."""

    @abstractmethod
    async def _create(self, params: dict[str, Any], *, stream: bool) -> Any:
        """Send the request through the SDK client."""

    @abstractmethod
    def _response(self, reply: Any) -> Response:
        """A neutral Response from the SDK's reply object."""

    @abstractmethod
    def _builder(self) -> StreamBuilder:
        """A fresh assembler for one streamed reply."""

    def _mapped(self, exc: Exception) -> LLMError:
        """The error-tree class for an SDK error (both SDKs share their error classes)."""
        sdk = self._sdk
        message = f"{self.name}: {getattr(exc, 'message', exc)}"
        if isinstance(exc, (sdk.AuthenticationError, sdk.PermissionDeniedError)):
            return LLMAuthError(f"{message}; check {self.key_variable}")
        if isinstance(exc, sdk.RateLimitError):
            error = LLMRateLimitError(message)
            error.retry_after = retry_after(exc)  # type: ignore[attr-defined]
            return error
        if isinstance(exc, sdk.NotFoundError):
            return LLMModelUnavailableError(f"{message}; is {self.model!r} served there?")
        if isinstance(exc, sdk.BadRequestError):
            text = str(exc).lower()
            if any(word in text for word in OVERFLOW_WORDS):
                return LLMContextOverflowError(message)
            return LLMError(message)
        if isinstance(exc, (sdk.APIConnectionError, sdk.InternalServerError)) or (
            isinstance(exc, sdk.APIStatusError) and exc.status_code >= 500
        ):
            return LLMTransientError(message)
        return LLMError(message)

    async def _send(self, params: dict[str, Any], *, stream: bool) -> Any:
        async def call() -> Any:
            try:
                return await self._create(params, stream=stream)
            except self._sdk.APIError as exc:
                raise self._mapped(exc) from exc

        return await with_retries(call, budget_s=self.retry_budget_s)

    async def complete(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice | None = None,
        max_tokens: int = 4096,
    ) -> Response:
        params = self._params(system, messages, tools, tool_choice, max_tokens)
        return self._response(await self._send(params, stream=False))

    async def stream(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice | None = None,
        max_tokens: int = 4096,
    ) -> AsyncIterator[StreamEvent]:
        params = self._params(system, messages, tools, tool_choice, max_tokens)
        events = await self._send(params, stream=True)
        builder = self._builder()
        try:
            async for event in events:
                for item in builder.feed(event):
                    yield item
        except self._sdk.APIError as exc:
            raise self._mapped(exc) from exc
        for item in builder.finish():
            yield item
        yield Complete(builder.response())


def import_sdk(module: str) -> Any:
    """The provider SDK, or a ConfigError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"the {module} SDK is not installed: pip install 'scratchpad[{module}]'"
        ) from exc


def retry_after(exc: Any) -> float | None:
    """Seconds the server asked to wait (a ``retry-after`` header), if it said."""
    try:
        return float(exc.response.headers.get("retry-after"))
    except (AttributeError, TypeError, ValueError):
        return None
