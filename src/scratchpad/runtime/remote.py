"""RemoteRuntime: a pad on a Scratchpad server (or any server speaking the remote-backend
protocol of DESIGN.md), driven over HTTP and server-sent events."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, SSEError, aconnect_sse

from scratchpad.errors import (
    ConfigError,
    InvalidInputError,
    PadClosedError,
    PadError,
    PadNotFoundError,
    ScratchpadError,
)
from scratchpad.runtime.base import ScratchpadRuntime, check_execute_args
from scratchpad.runtime.cell import Cell, DisplayEvent, OutputEvent, ProgressEvent, StreamItem

CONNECT_TIMEOUT_S = 30.0
DRAIN_S = 1.0  # how long the end of a stream may lag behind its cell
# An idle pooled connection is dropped by the client after this long, well before a server's
# keep-alive closes it (ours 75 s; gunicorn 2 s, uvicorn and most others 5 s): a server that
# closes first can do so just as the next request goes out on it, and that request dies with a
# reset and an unknown result (httpx's default expiry is uvicorn's 5 s, so they raced).
POOL_KEEPALIVE_S = 1.0


class RemoteRuntime(ScratchpadRuntime):
    """The runtime contract over HTTP; cells are kept locally as they come back."""

    def __init__(self, name: str, *, url: str, api_key: str, compact_keep: int = 5) -> None:
        super().__init__(name, compact_keep=compact_keep)
        self.url = url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=httpx.Timeout(CONNECT_TIMEOUT_S, read=None),  # cells may run for an hour
            limits=httpx.Limits(
                max_connections=100, max_keepalive_connections=20, keepalive_expiry=POOL_KEEPALIVE_S
            ),
        )
        self._order = asyncio.Lock()  # cells of one pad go out in call order
        self._running = 0
        self._closed = False
        self._destroyed = False

    @property
    def busy(self) -> bool:
        return self._running > 0

    @property
    def closed(self) -> bool:
        return self._closed or self._destroyed

    async def start(self) -> None:
        if self._destroyed:
            raise PadClosedError(f"pad {self.name!r} was removed; create it again to use it")
        await self._post("/scratchpad/start", {"name": self.name})
        self._closed = False

    async def reset(self) -> None:
        await self._post("/scratchpad/reset", {"name": self.name})
        self.cells = []

    async def close(self) -> None:
        self._closed = True
        await self._post("/scratchpad/close", {"name": self.name})

    async def cancel(self) -> None:
        await self._post("/scratchpad/cancel", {"name": self.name})

    async def cleanup(self) -> None:
        self._closed = self._destroyed = True
        try:
            await self._post("/scratchpad/cleanup", {"name": self.name})
        finally:
            await self._client.aclose()

    async def detach(self) -> None:
        """Drop the connection; the pad keeps running on the server (the CLI's way out)."""
        await self._client.aclose()

    async def server_pads(self) -> list[dict[str, Any]]:
        """Every pad the server knows (a Scratchpad server only): name, status, cells."""
        return list((await self._get("/v1/pads")).get("pads", []))

    async def load_cells(self) -> list[Cell]:
        """Fetch the pad's cells from the server's ``/v1`` API (a Scratchpad server only),
        so view/dump/to_ipynb show what the server holds."""
        response = await self._get(f"/v1/pads/{self.name}")
        self.cells = [Cell.from_dict(cell) for cell in response.get("cells", [])]
        return self.cells

    async def install_packages(self, packages: list[str]) -> str:
        answer = await self._post("/scratchpad/install", {"name": self.name, "packages": packages})
        return str(answer.get("result", ""))

    async def execute_streaming(
        self,
        code: str,
        *,
        description: str = "",
        estimated_time: str = "",
        estimated_seconds: float = 0.0,
    ) -> AsyncGenerator[StreamItem, None]:
        check_execute_args(code, description, estimated_seconds)
        if self.closed:
            raise PadClosedError(f"pad {self.name!r} is closed; start it again to run cells")
        body = {
            "name": self.name,
            "code": code,
            "description": description,
            "estimated_time": estimated_time
            or (f"{estimated_seconds:g}s" if estimated_seconds else ""),
            "estimated_seconds": estimated_seconds,
            "stream_output": True,  # our server's extension; other servers ignore it
        }
        async with self._order:
            self._running += 1
            try:
                async for item in self._stream(body):
                    yield item
            finally:
                self._running -= 1

    async def _stream(self, body: dict[str, Any]) -> AsyncGenerator[StreamItem, None]:
        cell: Cell | None = None
        try:
            async with aconnect_sse(
                self._client, "POST", "/scratchpad/execute-stream", json=body
            ) as source:
                if source.response.status_code >= 400:
                    await source.response.aread()
                    raise _error(source.response)
                events = source.aiter_sse()
                async for event in events:
                    message = json.loads(event.data)
                    if message.get("type") == "error":
                        raise PadError(f"pad {self.name!r}: {message.get('error')}")
                    item = _stream_item(message)
                    if isinstance(item, Cell):
                        cell = item
                        break
                    if item is not None:
                        yield item
                if cell is not None:
                    await _drain(events)
        except (httpx.HTTPError, SSEError, ValueError) as exc:
            if cell is None:
                what = f"went away during this cell ({exc!r}); its result is unknown"
                yield self._lost(body, what)
                return
        if cell is None:
            yield self._lost(body, "ended the stream without a result")
            return
        self.cells.append(cell)
        yield cell

    def _lost(self, body: dict[str, Any], what: str) -> Cell:
        """A cell whose fate the server did not report: killed, saying why."""
        cell = Cell(
            code=body["code"],
            description=body["description"],
            status="killed",
            error=f"The server at {self.url} {what}. Check it and run the cell again.\n",
        )
        self.cells.append(cell)
        return cell

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await _request(self._client, "POST", path, json=body)

    async def _get(self, path: str) -> dict[str, Any]:
        return await _request(self._client, "GET", path)


async def _drain(events: AsyncIterator[ServerSentEvent]) -> None:
    """Read what follows the cell (normally just the end of the stream) so the connection can
    be reused; a server that keeps the stream open costs the connection, never a hang."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError, SSEError):
        async with asyncio.timeout(DRAIN_S):
            async for _ in events:
                pass


async def _request(
    client: httpx.AsyncClient, method: str, path: str, **kwargs: Any
) -> dict[str, Any]:
    try:
        response = await client.request(method, path, **kwargs)
    except httpx.HTTPError as exc:
        raise PadError(f"cannot reach the pad server at {client.base_url}: {exc!r}") from exc
    if response.status_code >= 400:
        raise _error(response)
    try:
        answer = response.json()
    except ValueError as exc:
        raise PadError(f"the pad server at {client.base_url} did not answer JSON") from exc
    return answer if isinstance(answer, dict) else {}


def _stream_item(message: dict[str, Any]) -> StreamItem | None:
    """One SSE frame as a stream item (None for frame types this client does not know);
    a malformed frame is a ValueError, reported like a broken stream."""
    try:
        kind = message.get("type")
        if kind == "progress":
            return ProgressEvent(str(message.get("message", "")))
        if kind == "output" and message["stream"] in ("stdout", "stderr"):
            return OutputEvent(message["stream"], str(message["text"]))
        if kind == "display":
            return DisplayEvent(dict(message["data"]))
        if kind == "cell":
            return Cell.from_dict(message["cell"])
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed {message.get('type')!r} frame: {exc!r}") from exc
    return None


def _error(response: httpx.Response) -> ScratchpadError:
    """The error tree's class for an HTTP error answer, with the server's own words."""
    try:
        data = response.json()
    except ValueError:
        data = None
    ours = isinstance(data, dict) and "error" in data
    message = str(data["error"]) if ours else (response.text or response.reason_phrase)
    status = response.status_code
    if status == 401:
        return ConfigError(
            f"the pad server refused the key ({message}); check SCRATCHPAD_REMOTE_API_KEY"
        )
    if status == 404 and not ours:
        request = response.request
        return PadError(
            f"the server at {request.url.scheme}://{request.url.netloc.decode()} has no "
            f"{request.method} {request.url.path} ({message}): it does not offer this part "
            "of the Scratchpad API"
        )
    if status == 404:
        return PadNotFoundError(message)
    if status in (400, 413, 422):
        return InvalidInputError(message)
    if status == 409:
        return PadClosedError(message)
    return PadError(f"the pad server answered {status}: {message}")
