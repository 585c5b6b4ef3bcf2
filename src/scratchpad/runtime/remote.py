"""RemoteRuntime: a pad on a Scratchpad server (or any server speaking the remote-backend
protocol of DESIGN.md), driven over HTTP and server-sent events.

Every cell goes out with an id of its own. That makes two things safe: retrying a request
that failed before any answer came (a kept-alive connection the server had just closed), since
the server recognises a repeated id and never runs the cell twice; and cancelling exactly this
cell when the caller's task is cancelled. Cells ask the server to keep running when the
connection drops (``on_disconnect: continue``): a dropped connection is not a user's cancel.

When the stream drops after it began, the client follows the cell again on the server's
``GET /v1/pads/{name}/cells/{id}/events`` (a Scratchpad server's), from the start and then
with ``Last-Event-ID``, for up to ``reconnect_s`` seconds (waits of 0.2 s doubling to 5 s);
what it had already yielded is skipped, so nothing comes twice. The cell is only ever the
server's record: a cell the server no longer knows, a server without that route, or one that
stays away raises PadError (the result is unknown), never a made-up cell.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx
from httpx_sse import ServerSentEvent, SSEError, aconnect_sse

from scratchpad.errors import (
    InstallError,
    PadClosedError,
    PadError,
    PadNotFoundError,
    ScratchpadError,
    error_from_http,
)
from scratchpad.padnames import url_component
from scratchpad.runtime.base import (
    CLOSED,
    PadLLM,
    ScratchpadRuntime,
    check_cell_id,
    check_execute_args,
    take_turn,
)
from scratchpad.runtime.cell import (
    Cell,
    CellStatus,
    StreamItem,
)
from scratchpad.runtime.journal import CellJournal
from scratchpad.runtime.remote_http import (
    CONNECT_TIMEOUT_S,
    Seen,
    cell_body,
    drain,
    error_of,
    error_type,
    request_json,
    resynced,
    stream_item,
)
from scratchpad.runtime.venv import validate_specs

if TYPE_CHECKING:
    from scratchpad.runtime.handle import CellHandle

# An idle pooled connection is dropped by the client after this long, well before a server's
# keep-alive closes it (ours 75 s; gunicorn 2 s, uvicorn and most others 5 s): a server that
# closes first can do so just as the next request goes out on it, and that request dies with a
# reset and an unknown result (httpx's default expiry is uvicorn's 5 s, so they raced). Should
# it happen anyway, the cell is sent again with its id (see _stream).
POOL_KEEPALIVE_S = 1.0
CANCEL_TIMEOUT_S = 10.0
RECONNECT_S = 120.0  # SCRATCHPAD_RECONNECT_S
RECONNECT_FIRST_S = 0.2
RECONNECT_STEP_MAX_S = 5.0
# How the protocol reports a failed install: "Install failed (exit N): ..." or "(timed out)".
INSTALL_FAILED = re.compile(r"Install failed \((?:exit (-?\d+)|[^)]*)\): ?(.*)", re.DOTALL)

log = logging.getLogger(__name__)


class RemoteRuntime(ScratchpadRuntime):
    """The runtime contract over HTTP; cells are kept locally as they come back."""

    def __init__(
        self,
        name: str,
        *,
        url: str,
        api_key: str,
        compact_keep: int = 5,
        reconnect_s: float = RECONNECT_S,
    ) -> None:
        super().__init__(name, compact_keep=compact_keep)
        self.url = url.rstrip("/")
        self.reconnect_s = reconnect_s  # how long a dropped cell stream is followed again
        self._client = httpx.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=httpx.Timeout(CONNECT_TIMEOUT_S, read=None),  # cells may run for an hour
            limits=httpx.Limits(
                max_connections=100, max_keepalive_connections=20, keepalive_expiry=POOL_KEEPALIVE_S
            ),
        )
        self._order = asyncio.Lock()  # cells of one pad go out in call order
        self._waiting: dict[str, asyncio.Event] = {}  # cells not sent yet, by id: cancelled?
        self._running = 0
        self._closed = False
        self._destroyed = False
        self._cancels: set[asyncio.Task[None]] = set()
        self._following: set[asyncio.Task[None]] = set()  # cells handles follow
        # What the pad asks its server's cluster for, sent with each start (None: nothing)
        self.resources: dict[str, object] | None = None

    @property
    def busy(self) -> bool:
        return self._running > 0

    @property
    def closed(self) -> bool:
        return self._closed or self._destroyed

    async def start(self) -> None:
        if self._destroyed:
            raise PadClosedError(f"pad {self.name!r} was removed; create it again to use it")
        body: dict[str, Any] = {"name": self.name}
        if self.resources is not None:  # only then: servers before resources never see it
            body["resources"] = self.resources
        await self._post("/scratchpad/start", body)
        self._closed = False

    async def configure_llm(self, llm: PadLLM) -> None:
        await self._post(
            "/scratchpad/start",
            {
                "name": self.name,
                "coding_provider": llm.provider,
                "coding_model": llm.model,
                "coding_api_key": llm.api_key,
                "coding_base_url": llm.base_url,
            },
        )

    async def reset(self) -> None:
        answer = await self._post("/scratchpad/reset", {"name": self.name})
        if answer.get("reset") is False:  # the server had no such pad (it answers 200)
            raise PadNotFoundError(f"no pad named {self.name!r}; there is nothing to reset")
        self.cells = []

    async def revert(self) -> int:
        answer = await self._post("/scratchpad/revert", {"name": self.name})
        if answer.get("reverted") is False:  # the server had no such pad (it answers 200)
            raise PadNotFoundError(f"no pad named {self.name!r}; there is nothing to revert")
        back = answer.get("after_cell")
        return back if isinstance(back, int) else 0

    async def close(self, *, reason: str = CLOSED) -> None:
        self._closed = True
        await self._post("/scratchpad/close", {"name": self.name})

    async def cancel(self, cell_id: str | None = None) -> bool:
        waiting = self._waiting.get(cell_id or "")
        if waiting is not None:  # not sent yet: it never will be
            waiting.set()
            return True
        body: dict[str, Any] = {"name": self.name}
        if cell_id is not None:
            body["id"] = cell_id
        answer = await self._post("/scratchpad/cancel", body)
        cancelled = bool(answer.get("cancelled", True))  # servers written elsewhere do not say
        if not cancelled and cell_id is None:  # the pad idle, or gone: PadNotFoundError then
            await self._get(f"/v1/pads/{url_component(self.name)}/info")
        return cancelled

    async def cleanup(self) -> None:
        self._closed = self._destroyed = True
        try:
            await self._post("/scratchpad/cleanup", {"name": self.name})
        finally:
            for task in self._following:
                task.cancel()
            await self._client.aclose()

    async def detach(self) -> None:
        """Drop the connection; the pad keeps running on the server (the CLI's way out)."""
        for task in self._following:
            task.cancel()
        if self._cancels:
            await asyncio.wait(self._cancels, timeout=CANCEL_TIMEOUT_S)
        await self._client.aclose()

    async def server_pads(self) -> list[dict[str, Any]]:
        """Every pad the server knows (a Scratchpad server only): name, status, cells."""
        return list((await self._get("/v1/pads")).get("pads", []))

    async def load_cells(self) -> list[Cell]:
        """Fetch the pad's cells from the server's ``/v1`` API (a Scratchpad server only),
        so view/dump/to_ipynb show what the server holds."""
        response = await self._get(f"/v1/pads/{url_component(self.name)}")
        self.cells = [Cell.from_dict(cell) for cell in response.get("cells", [])]
        return self.cells

    async def install_packages(self, packages: list[str]) -> str:
        """The installer's output; InstallError when the server says the install failed
        (the protocol answers a failure as its result text, ``Install failed (…): …``)."""
        validate_specs(packages)  # refused here: the server answers them as a failed install
        answer = await self._post("/scratchpad/install", {"name": self.name, "packages": packages})
        result = str(answer.get("result", ""))
        failed = INSTALL_FAILED.match(result)
        if failed is not None:
            code = failed.group(1)
            raise InstallError(  # in the words a local pad's failure has (the server's)
                failed.group(2),
                exit_code=int(code) if code is not None else None,
                output=failed.group(2),
            )
        return result

    async def execute_streaming(
        self,
        code: str,
        *,
        description: str = "",
        estimated_time: str = "",
        estimated_seconds: float = 0.0,
        timeout_s: float | None = None,
        cell_id: str | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        request = check_execute_args(
            code, description, estimated_seconds, estimated_time, cell_id, timeout_s
        )
        if self.closed:
            raise PadClosedError(f"pad {self.name!r} is closed; start it again to run cells")
        body = cell_body(self.name, request)
        cancelled = self._waiting[body["id"]] = asyncio.Event()
        try:
            turn = await take_turn(self._order, cancelled)
        finally:
            del self._waiting[body["id"]]
        if not turn:
            yield self._local_cell(body, "Cell cancelled before it started; nothing ran.")
            return
        self._running += 1
        try:
            async for item in self._stream(body):
                yield item
        except (asyncio.CancelledError, GeneratorExit):
            self._cancel_in_background(body["id"])  # the caller went away mid-cell
            raise
        finally:
            self._running -= 1
            self._order.release()

    async def start_cell(
        self,
        code: str,
        *,
        description: str = "",
        estimated_time: str = "",
        estimated_seconds: float = 0.0,
        timeout_s: float | None = None,
        cell_id: str | None = None,
    ) -> CellHandle:
        """Submit the cell to the server's ``POST /v1/pads/{name}/cells`` (answered once it
        is queued there) and follow it; a server without that route runs it on a stream."""
        request = check_execute_args(
            code, description, estimated_seconds, estimated_time, cell_id, timeout_s
        )
        body = cell_body(self.name, request)
        if await self._submit(body, timeout_s) is None:
            return await super().start_cell(  # an older server: no detached cells
                code, description=description, estimated_time=estimated_time,
                estimated_seconds=estimated_seconds, timeout_s=timeout_s, cell_id=body["id"],
            )  # fmt: skip
        return await self.cell(body["id"])

    async def submit(
        self,
        code: str,
        *,
        description: str = "",
        estimated_time: str = "",
        estimated_seconds: float = 0.0,
        timeout_s: float | None = None,
        cell_id: str | None = None,
    ) -> dict[str, Any]:
        """Submit a detached cell and follow nothing (the CLI's ``exec --detach``): the cell
        as it stands once the server accepted it (``{id, status, ...}``). PadError from a
        server without detached cells: there is nothing to come back to there."""
        request = check_execute_args(
            code, description, estimated_seconds, estimated_time, cell_id, timeout_s
        )
        response = await self._submit(cell_body(self.name, request), timeout_s)
        if response is None:
            raise PadError(
                f"the pad server at {self.url} has no detached cells (no POST "
                "/v1/pads/{name}/cells: an older server); run the cell without detaching"
            )
        try:
            answer = response.json()
        except ValueError as exc:
            raise PadError(f"the pad server at {self.url} did not answer JSON") from exc
        return answer if isinstance(answer, dict) else {}

    async def _submit(self, body: dict[str, Any], timeout_s: float | None) -> httpx.Response | None:
        """``POST /v1/pads/{name}/cells`` of the cell ``body`` describes; None when the
        server has no such route."""
        submit = {key: body[key] for key in ("code", "id", "description", "estimated_time")}
        submit |= {"estimated_seconds": body["estimated_seconds"], "timeout_s": timeout_s}
        path = f"/v1/pads/{url_component(self.name)}/cells"
        try:
            response = await self._client.post(path, json=submit)
        except httpx.HTTPError as exc:
            raise PadError(f"cannot reach the pad server at {self.url}: {exc!r}") from exc
        if response.status_code in (404, 405) and error_type(response) != "PadNotFoundError":
            return None
        if response.status_code >= 400:
            raise error_of(response)
        return response

    async def server_cells(self, status: str | None = None) -> list[dict[str, Any]]:
        """The pad's running, queued and recently finished cells as the server lists them
        (a Scratchpad server only); ``status``: only those (running, queued or recent)."""
        query = "" if status is None else f"?status={status}"
        answer = await self._get(f"/v1/pads/{url_component(self.name)}/cells{query}")
        return list(answer.get("cells", []))

    async def standing(self, cell_id: str) -> dict[str, Any]:
        """Cell ``cell_id`` as it stands on the server: queued or running (its output so
        far), or its record; PadNotFoundError, in the server's words, for no such cell."""
        cell_id = str(check_cell_id(cell_id))
        return await self._get(
            f"/v1/pads/{url_component(self.name)}/cells/{url_component(cell_id)}"
        )

    def follow(self, cell_id: str) -> AsyncGenerator[StreamItem, None]:
        """Cell ``cell_id``'s items from its start, live, then its whole record, whoever
        started it; a dropped connection is followed again with ``Last-Event-ID`` (see the
        module). Closing it early leaves the cell running."""
        cell_id = str(check_cell_id(cell_id))
        return self._follow({"id": cell_id}, Seen(), "went away while the cell was followed")

    async def cell(self, cell_id: str) -> CellHandle:
        """A handle on cell ``cell_id`` on the server, whoever started it: its record, or its
        events followed from the start (reconnecting as a dropped stream does)."""
        from scratchpad import events
        from scratchpad.runtime.handle import CellHandle

        cell_id = str(check_cell_id(cell_id))
        standing = await self.standing(cell_id)
        if standing.get("status") not in ("queued", "running"):
            return CellHandle.recorded(self, Cell.from_dict(standing))
        journal = CellJournal(cell_id, 0)

        async def follow() -> None:
            try:
                async for item in self.follow(cell_id):
                    journal.append(events.from_item(cell_id, item), 0, 0)
            except ScratchpadError as exc:  # the handle's wait says None; this says why
                log.warning("pad %r: cannot follow cell %s: %s", self.name, cell_id, exc)

        task = asyncio.get_running_loop().create_task(follow())
        self._following.add(task)
        task.add_done_callback(self._following.discard)
        return CellHandle(self, cell_id, journal)

    async def _stream(self, body: dict[str, Any]) -> AsyncGenerator[StreamItem, None]:
        cell: Cell | None = None
        seen = Seen()
        for attempt in (1, 2):
            answered = False
            try:
                async with aconnect_sse(
                    self._client, "POST", "/scratchpad/execute-stream", json=body
                ) as source:
                    answered = True
                    if source.response.status_code >= 400:
                        await source.response.aread()
                        raise error_of(source.response)
                    async for item in self._items(source.aiter_sse()):
                        if isinstance(item, Cell):
                            cell = item
                        else:
                            seen.count(item)
                            yield item
            except ScratchpadError:
                raise  # the server's own answer, e.g. a refused argument
            except httpx.ConnectError as exc:
                raise PadError(f"cannot reach the pad server at {self.url}: {exc}") from exc
            except (httpx.HTTPError, SSEError, ValueError) as exc:
                if cell is None and not answered and attempt == 1:
                    continue  # nothing came back: safe to ask again, the id prevents a rerun
                if cell is None:
                    what = f"went away during this cell ({exc!r})"
                    async for item in self._follow(body, seen, what):
                        yield item
                    return
            break
        if cell is None:
            async for item in self._follow(body, seen, "ended the stream without a result"):
                yield item
            return
        self.cells.append(cell)
        yield cell

    async def _follow(
        self, body: dict[str, Any], seen: Seen, what: str
    ) -> AsyncGenerator[StreamItem, None]:
        """Follow a cell whose stream dropped on the server's cell events, reconnecting with
        ``Last-Event-ID``; its items not yielded yet, then its record. PadError when the
        server cannot say (see the module)."""
        path = f"/v1/pads/{url_component(self.name)}/cells/{url_component(body['id'])}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.reconnect_s
        delay = RECONNECT_FIRST_S
        last: str | None = None
        while True:
            headers = {"Last-Event-ID": last} if last else {}
            try:
                async with aconnect_sse(
                    self._client, "GET", f"{path}/events", headers=headers
                ) as source:
                    if source.response.status_code >= 400:
                        await source.response.aread()
                        raise self._unfollowable(source.response, what)
                    async for event in source.aiter_sse():
                        last = event.id or last
                        message = json.loads(event.data)
                        if message.get("type") == "resync":
                            seen.skip_all()  # what follows is new; what it missed, the cell has
                            message = resynced(message)
                        item = stream_item(message)
                        if isinstance(item, Cell):
                            cell = await self._whole(path, item)
                            self.cells.append(cell)
                            yield cell
                            return
                        if item is not None and (item := seen.new(item)) is not None:
                            yield item
            except ScratchpadError:
                raise
            except (httpx.HTTPError, SSEError, ValueError) as exc:
                log.info("pad %r: following cell %s again (%r)", self.name, body["id"], exc)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise PadError(
                    f"The server at {self.url} {what} and did not answer for "
                    f"{self.reconnect_s:g} s (SCRATCHPAD_RECONNECT_S); the cell's result is "
                    f"unknown: it may still run (GET {path})."
                )
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, RECONNECT_STEP_MAX_S)

    def _unfollowable(self, response: httpx.Response, what: str) -> ScratchpadError:
        """Why a dropped cell cannot be followed on this server: no such route, or no such
        cell (it was never recorded: the server restarted), or the server's own error."""
        error = error_of(response)
        if response.status_code not in (404, 405):
            return error
        if error_type(response) == "PadNotFoundError":
            why = "and no longer knows the cell (it restarted before recording it)"
        else:
            why = "and cannot be asked for the cell again (it has no cell events)"
        return PadError(
            f"The server at {self.url} {what} {why}; the cell's result is unknown. Check the "
            "pad and run the cell again."
        )

    async def _whole(self, path: str, cell: Cell) -> Cell:
        """The whole record (a stream's frame may have cut long fields)."""
        try:
            return Cell.from_dict(await self._get(path))
        except (ScratchpadError, ValueError, TypeError):
            return cell

    async def _items(self, events: AsyncIterator[ServerSentEvent]) -> AsyncIterator[StreamItem]:
        """The stream's items up to its cell; what follows the cell is read (briefly) so the
        connection can be reused."""
        async for event in events:
            message = json.loads(event.data)
            if message.get("type") == "error":
                kind, text = message.get("error_type"), str(message.get("error"))
                named = text.startswith(f"pad {self.name!r}")  # the server named it already
                raise error_from_http(500, kind, text if named else f"pad {self.name!r}: {text}")
            item = stream_item(message)
            if item is not None:
                yield item
            if isinstance(item, Cell):
                await drain(events)
                return

    def _cancel_in_background(self, cell_id: str) -> None:
        """Cancel the cell on the server without making the (cancelled) caller wait."""

        async def cancel() -> None:
            try:
                async with asyncio.timeout(CANCEL_TIMEOUT_S):
                    await self.cancel(cell_id)
            except (ScratchpadError, TimeoutError) as exc:
                log.warning("could not cancel cell %s of pad %r: %s", cell_id, self.name, exc)

        if self._client.is_closed:
            return
        task = asyncio.get_running_loop().create_task(cancel())
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    def _local_cell(
        self, body: dict[str, Any], error: str, status: CellStatus = "cancelled"
    ) -> Cell:
        """A cell that ends here, without the server's word (never sent, or lost)."""
        cell = Cell(
            code=body["code"],
            description=body["description"],
            id=body["id"],
            status=status,
            error=error + "\n",
        )
        self.cells.append(cell)
        return cell

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await request_json(self._client, "POST", path, json=body)

    async def _get(self, path: str) -> dict[str, Any]:
        return await request_json(self._client, "GET", path)
