"""``scratchpad server start|status|stop``: this home's background pad server."""

from __future__ import annotations

import typer

from scratchpad.cli.background import describe, endpoint, stop
from scratchpad.cli.commands import Command, Group
from scratchpad.cli.output import console, fail
from scratchpad.config import Settings
from scratchpad.errors import ScratchpadError
from scratchpad.server.state import log_path, running_record

server_app = typer.Typer(
    cls=Group,
    help="The pad server the CLI uses (started in the background when needed).",
    no_args_is_help=True,
)


def _settings() -> Settings:
    try:
        return Settings.load()
    except ScratchpadError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None


@server_app.command(cls=Command)
def start() -> None:
    """Start the background server for this home (nothing to do when one runs)."""
    settings = _settings()
    try:
        target = endpoint(settings)
    except ScratchpadError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None
    record = running_record(settings)
    if record is None:  # SCRATCHPAD_BACKEND=remote: that server is not this home's to start
        where = f"pad commands use the server at {target.url} (SCRATCHPAD_REMOTE_URL)"
        console.print(where, markup=False)
        return
    console.print(f"the {describe(settings, record)}; log: {log_path(settings)}", markup=False)


@server_app.command(cls=Command)
def status() -> None:
    """Say whether this home's server runs: its home, address, pid and where its pads work
    (exit 1 if none runs)."""
    settings = _settings()
    record = running_record(settings)
    if record is None:
        console.print(
            f"no server runs for {settings.home} (SCRATCHPAD_HOME); a server bound to a "
            "workspace DIR has its home in DIR/.scratchpad",
            markup=False,
        )
        raise typer.Exit(1)
    console.print(f"running: the {describe(settings, record)}", markup=False)


@server_app.command("stop", cls=Command)
def stop_() -> None:
    """Stop this home's server; it closes every pad first (their venvs stay; pads on a Ray
    cluster keep running there, and sleep when idle)."""
    settings = _settings()
    record = stop(settings)
    if record is None:
        console.print(f"no server runs for {settings.home}", markup=False)
        return
    console.print(f"stopped the server at {record.url} (pid {record.pid})", markup=False)
