"""Cells that run whether or not a terminal waits: ``exec --detach`` submits one and exits,
``cells PAD`` lists a pad's running, queued and recent cells, ``attach PAD ID`` follows one.

``attach`` is ``docker attach --sig-proxy=false`` / ``kubectl attach`` without ``-i``: Ctrl-C
detaches (the cell keeps running; exit 130, with how to come back) and never touches the cell.
With ``--cancel``, Ctrl-C cancels the cell instead, as it does in ``exec`` (a second one stops
waiting). A dropped connection is followed again by RemoteRuntime (``Last-Event-ID``).
"""

from __future__ import annotations

import asyncio
import shlex
import signal
import time
from pathlib import Path
from types import TracebackType
from typing import Annotated, Any

import typer
from rich.table import Table

from scratchpad.cli.app import (
    CancelOnInterrupt,
    PadArg,
    app,
    checked_id,
    end_cell,
    last_cell,
    on_server,
)
from scratchpad.cli.commands import Command
from scratchpad.cli.output import (
    LiveCell,
    console,
    err_console,
    fail,
    print_json,
    print_text,
    shown,
)
from scratchpad.errors import PadNotFoundError
from scratchpad.runtime.cell import Cell
from scratchpad.runtime.padinfo import span
from scratchpad.runtime.remote import RemoteRuntime

LIVE = ("queued", "running")
SHOWN = ("running", "queued", "recent")
LISTED = ("id", "number", "status", "description", "started_at", "ended_at")
COLOURS = {"ok": "green", "running": "yellow", "queued": "cyan"}  # any other ending: red
DESCRIPTION_CHARS = 60


def exec_detached(
    pad: str,
    source: str,
    *,
    description: str,
    estimate: float,
    timeout: float | None,
    cell_id: str | None,
    as_json: bool,
    save_images: Path | None,
    resources: dict[str, object] | None = None,
) -> None:
    """``exec --detach``: submit the cell, print its id (stdout: one line, for scripts) and
    how to follow it (stderr), and return while it runs on (in a pad placed by
    ``resources``, when given)."""
    if save_images is not None:
        fail("--save-images waits for the cell's end; run the cell without --detach to save them")
        raise typer.Exit(2)

    async def job(runtime: RemoteRuntime) -> dict[str, Any]:
        return await runtime.submit(
            source,
            description=description,
            estimated_seconds=estimate,
            timeout_s=timeout,
            cell_id=cell_id,
        )

    standing = on_server(pad, job, resources)
    if as_json:
        print_json(standing)
        return
    submitted, status = str(standing.get("id", "")), str(standing.get("status", ""))
    print_text(submitted)
    follow = f"scratchpad attach {shlex.quote(pad)} {submitted}"
    if status in LIVE:
        cancel = f"scratchpad cancel {shlex.quote(pad)} --id {submitted}"
        print_text(f"cell {submitted} of {pad} is {status}; follow it: {follow}; "
                   f"cancel it: {cancel}", err=True)  # fmt: skip
    else:  # an id given before, of a cell that ended: it did not run again
        print_text(
            f"cell {submitted} of {pad} ended already ({status}); see it: {follow}", err=True
        )


def checked_status(value: str | None) -> str | None:
    if value is not None and value not in SHOWN:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(SHOWN)}")
    return value


@app.command("cells", cls=Command)
def cells(
    pad: PadArg,
    status: Annotated[
        str | None,
        typer.Option(
            callback=checked_status,
            metavar="STATUS",
            help="Only these: running, queued or recent (ended in the last minutes).",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the cells as JSON: [{id, number, status, description, started_at, "
            "ended_at}] (epoch seconds: started_at of a running cell, ended_at of an ended "
            "one; else null).",
        ),
    ] = False,
) -> None:
    """List a pad's running, queued and recently ended cells ('view' shows its history)."""
    listed = on_server(pad, lambda runtime: _listed(runtime, status))
    if as_json:
        print_json([{key: cell.get(key) for key in LISTED} for cell in listed])
        return
    if not listed:
        which = status or "running, queued or recent"
        print_text(f"no {which} cells in {pad}; its history: scratchpad view {shlex.quote(pad)}")
        return
    table = Table("id", "#", "status", "description", "age")
    table.columns[0].no_wrap = True
    now = time.time()
    for cell in listed:
        state = str(cell.get("status"))
        colour = COLOURS.get(state, "red")
        table.add_row(
            shown(cell.get("id")),
            str(cell.get("number") or ""),
            f"[{colour}]{shown(state)}[/{colour}]",
            shown(_first_line(str(cell.get("description") or ""))),
            _age(cell, now),
        )
    console.print(table)


async def _listed(runtime: RemoteRuntime, status: str | None) -> list[dict[str, Any]]:
    """The pad's cells as the server lists them; PadNotFoundError for a pad it has not."""
    listed = await runtime.server_cells(status)
    if not listed and runtime.name not in {str(p.get("name")) for p in await runtime.server_pads()}:
        raise PadNotFoundError(f"no pad named {runtime.name!r}; create it by running a cell in it")
    return listed


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= DESCRIPTION_CHARS else line[: DESCRIPTION_CHARS - 1] + "…"


def _age(cell: dict[str, Any], now: float) -> str:
    """How long a running cell has run ('12 s'), when an ended one ended ('3 min ago')."""
    started, ended = cell.get("started_at"), cell.get("ended_at")
    if isinstance(ended, (int, float)):
        return f"{span(now - ended)} ago"
    if cell.get("status") == "running" and isinstance(started, (int, float)):
        return span(now - started)
    return ""


@app.command(cls=Command)
def attach(
    pad: PadArg,
    cell_id: Annotated[
        str,
        typer.Argument(
            metavar="ID", callback=checked_id, help="The cell's id (as 'exec --detach' printed)."
        ),
    ],
    cancel: Annotated[
        bool,
        typer.Option(
            "--cancel",
            help="Ctrl-C cancels the cell (as in exec) instead of detaching from it.",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print only the ended cell, as JSON.")
    ] = False,
) -> None:
    """Follow a cell: its output so far, then as it comes, then its result; exit 0 when it
    ended ok, 1 when not. Ctrl-C detaches (exit 130): the cell keeps running.

    A cell that ended is printed at once.
    """
    live = LiveCell()

    async def job(runtime: RemoteRuntime) -> Cell | None:
        guard = CancelOnInterrupt(runtime, cell_id) if cancel else DetachOnInterrupt()
        cell = None
        async with guard:
            cell = await _followed(runtime, cell_id, pad, None if as_json else live)
        return cell

    cell = on_server(pad, job)
    if cell is None:
        quoted = shlex.quote(pad)
        print_text(
            f"detached from cell {cell_id} of {pad}; it keeps running. Follow it again: "
            f"scratchpad attach {quoted} {cell_id}; cancel it: scratchpad cancel {quoted} "
            f"--id {cell_id}",
            err=True,
        )
        raise typer.Exit(130)
    if not end_cell(cell, live, as_json):
        raise typer.Exit(1)


async def _followed(runtime: RemoteRuntime, cell_id: str, pad: str, live: LiveCell | None) -> Cell:
    """Cell ``cell_id`` once it ended, its events shown on ``live`` as they come."""
    standing = await runtime.standing(cell_id)  # no such cell: the server's words
    status = standing.get("status")
    if status not in LIVE:
        return Cell.from_dict(standing)
    if live is not None:
        err_console.print(
            f"[dim]cell {shown(cell_id)} of {shown(pad)} is {shown(status)}; its output follows "
            "(Ctrl-C detaches)[/dim]"
        )
    return await last_cell(runtime.follow(cell_id), None if live is None else live.event)


class DetachOnInterrupt:
    """Ctrl-C stops following the cell, which runs on: the work under it is cancelled and
    :attr:`detached` says so (nothing is sent to the server)."""

    def __init__(self) -> None:
        self.detached = False
        self._loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()

    async def __aenter__(self) -> None:
        self._loop.add_signal_handler(signal.SIGINT, self._interrupted)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> bool:
        self._loop.remove_signal_handler(signal.SIGINT)
        if self.detached and kind is asyncio.CancelledError and self._main is not None:
            self._main.uncancel()  # our own cancel, not the caller's: it ends here
            return True
        return False

    def _interrupted(self) -> None:
        if not self.detached and self._main is not None:
            self.detached = True
            self._main.cancel()
