"""The remote-backend protocol over HTTP, as a client speaks it: requests and the error
tree's class for an error answer (``request_json``, ``error_of``), SSE frames as stream items
(``stream_item``), a cell's request body (``cell_body``), what a dropped stream already
yielded (``Seen``); and ``RemoteServer``, what a server says of its pads as a whole."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, SSEError

from scratchpad.errors import (
    PadError,
    PadNotFoundError,
    ScratchpadError,
    UnauthorizedError,
    error_from_http,
)
from scratchpad.padnames import url_component
from scratchpad.runtime.base import CellRequest
from scratchpad.runtime.cell import (
    Cell,
    DisplayEvent,
    OutputEvent,
    ProgressEvent,
    StreamItem,
    new_cell_id,
)
from scratchpad.runtime.padinfo import PadInfo

CONNECT_TIMEOUT_S = 30.0
DRAIN_S = 1.0  # how long the end of a stream may lag behind its cell


class RemoteServer:
    """What a Scratchpad server says of its pads as a whole (its ``/v1`` API), for a
    manager whose pads live there: every pad and its status, whether one exists."""

    def __init__(self, url: str, api_key: str) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}"}

    async def pads(self) -> list[PadInfo]:
        answer = await self._get("/v1/pads")
        return [pad_info(pad) for pad in answer.get("pads", []) if isinstance(pad, dict)]

    async def pad_info(self, name: str) -> PadInfo:
        """Pad ``name`` as the server lists it; PadNotFoundError when it has none."""
        return pad_info(await self._get(f"/v1/pads/{url_component(name)}/info"))

    async def fork(self, source: str, target: str) -> PadInfo:
        """Fork pad ``source`` into a new pad ``target`` there (see ScratchpadManager.fork);
        the new pad's line. It may build a venv: no read timeout."""
        path = f"/v1/pads/{url_component(source)}/fork"
        return pad_info(await self._send("POST", path, json={"to": target}, read=None))

    async def has(self, name: str) -> bool:
        try:
            await self.pad_info(name)
        except PadNotFoundError:
            return False
        return True

    async def _get(self, path: str) -> dict[str, Any]:
        return await self._send("GET", path)

    async def _send(
        self, method: str, path: str, *, read: float | None = CONNECT_TIMEOUT_S, **kwargs: Any
    ) -> dict[str, Any]:
        timeout = httpx.Timeout(CONNECT_TIMEOUT_S, read=read)
        async with httpx.AsyncClient(
            base_url=self.url, headers=self._headers, timeout=timeout
        ) as client:
            return await request_json(client, method, path, **kwargs)


def pad_info(answer: dict[str, Any]) -> PadInfo:
    """A pad's line of the server's list (fields this client does not know are left out)."""
    known = {field.name for field in dataclasses.fields(PadInfo)}
    return PadInfo(**{key: value for key, value in answer.items() if key in known})


def credentials_description(url: str, api_key: str, timeout: float = 5.0) -> str:
    """What the pad server tells a model of its credentials (names only); "" when it cannot
    say (an older server, or none answering): the tool then describes no credentials."""
    try:
        answer = httpx.get(
            f"{url.rstrip('/')}/v1/vault/description",
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
        )
        description = answer.json().get("description", "") if answer.is_success else ""
    except (httpx.HTTPError, ValueError, AttributeError):
        return ""
    return description if isinstance(description, str) else ""


class Seen:
    """What a dropped stream already yielded, so following the cell again yields the rest
    only: characters per output stream, progress messages and displays, in order."""

    def __init__(self) -> None:
        self.chars: dict[str, int] = {}
        self.progress = 0
        self.displays = 0

    def count(self, item: StreamItem) -> None:
        if isinstance(item, OutputEvent):
            self.chars[item.stream] = self.chars.get(item.stream, 0) + len(item.text)
        elif isinstance(item, ProgressEvent):
            self.progress += 1
        elif isinstance(item, DisplayEvent):
            self.displays += 1

    def new(self, item: StreamItem) -> StreamItem | None:
        """``item`` (or its part) not yielded before; None when it was."""
        if isinstance(item, OutputEvent):
            skip = self.chars.get(item.stream, 0)
            if skip:
                self.chars[item.stream] = max(0, skip - len(item.text))
                rest = item.text[skip:]
                return OutputEvent(item.stream, rest) if rest else None
        elif isinstance(item, ProgressEvent) and self.progress:
            self.progress -= 1
            return None
        elif isinstance(item, DisplayEvent) and self.displays:
            self.displays -= 1
            return None
        return item

    def skip_all(self) -> None:
        self.chars.clear()
        self.progress = self.displays = 0


def resynced(message: dict[str, Any]) -> dict[str, Any]:
    """A resync frame as the cell frame it stands for once the cell ended (else nothing)."""
    cell = message.get("cell")
    if isinstance(cell, dict) and cell.get("status") not in (None, "queued", "running"):
        return {"type": "cell", "cell": cell}
    return {}


def cell_body(name: str, request: CellRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "code": request.code,
        "description": request.description,
        "estimated_time": request.estimated_time,
        "estimated_seconds": request.estimated_seconds,
        "id": request.cell_id or new_cell_id(),
        "stream_output": True,  # our server's extensions; other servers ignore them
        "on_disconnect": "continue",
    }
    if request.timeout_s is not None:
        body["timeout_s"] = request.timeout_s
    return body


async def drain(events: AsyncIterator[ServerSentEvent]) -> None:
    """Read what follows the cell (normally just the end of the stream) so the connection can
    be reused; a server that keeps the stream open costs the connection, never a hang."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError, SSEError):
        async with asyncio.timeout(DRAIN_S):
            async for _ in events:
                pass


async def request_json(
    client: httpx.AsyncClient, method: str, path: str, **kwargs: Any
) -> dict[str, Any]:
    try:
        response = await client.request(method, path, **kwargs)
    except httpx.HTTPError as exc:
        raise PadError(f"cannot reach the pad server at {client.base_url}: {exc!r}") from exc
    if response.status_code >= 400:
        raise error_of(response)
    try:
        answer = response.json()
    except ValueError as exc:
        raise PadError(f"the pad server at {client.base_url} did not answer JSON") from exc
    return answer if isinstance(answer, dict) else {}


def stream_item(message: dict[str, Any]) -> StreamItem | None:
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


def error_type(response: httpx.Response) -> str | None:
    """The error class an error answer names (None when it names none)."""
    try:
        kind = response.json().get("type")
    except (ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None


def error_of(response: httpx.Response) -> ScratchpadError:
    """The error tree's class for an HTTP error answer, with the server's own words."""
    try:
        data = response.json()
    except ValueError:
        data = None
    ours = isinstance(data, dict) and "error" in data
    message = str(data["error"]) if ours else (response.text or response.reason_phrase)
    status = response.status_code
    if status == 401:
        return UnauthorizedError(
            f"the pad server refused the key ({message}); check SCRATCHPAD_REMOTE_API_KEY"
        )
    if status in (404, 405) and not ours:
        request = response.request
        return PadError(
            f"the server at {request.url.scheme}://{request.url.netloc.decode()} has no "
            f"{request.method} {request.url.path} ({message}): it does not offer this part "
            "of the Scratchpad API"
        )
    kind = data.get("type") if isinstance(data, dict) else None
    if status >= 500 and kind is None:
        message = f"the pad server answered {status}: {message}"
    return error_from_http(status, kind, message)
