"""``scratchpad obs``: look into the observation store from a terminal."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, TypeVar

import typer
from rich.table import Table

from scratchpad.cli.commands import Command, Group
from scratchpad.cli.output import console, fail, print_text, shown
from scratchpad.errors import ScratchpadError
from scratchpad.observations import ObservationStore

obs_app = typer.Typer(
    cls=Group, help="Large tool outputs kept out of the model's context.", no_args_is_help=True
)
T = TypeVar("T")


def with_store(job: Callable[[ObservationStore], T]) -> T:
    try:
        with ObservationStore() as store:
            return job(store)
    except ScratchpadError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None


@obs_app.command("ls", cls=Command)
def ls(
    turn: Annotated[str | None, typer.Option(help="Only this turn's live entries.")] = None,
) -> None:
    """List stored observations (all of them, or one turn's)."""
    entries = with_store(lambda s: s.list_for_turn(turn) if turn else s.list_all())
    if not entries:
        console.print("no observations stored")
        return
    table = Table("id", "turn", "step", "tool", "kind", "bytes", "expires")
    for info in entries:
        expires = datetime.fromtimestamp(info.expires_at).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(
            shown(info.id),
            shown(info.turn_id),
            str(info.step_num if info.step_num is not None else ""),
            shown(info.tool or ""),
            shown(info.kind),
            str(info.size_bytes),
            expires,
        )
    console.print(table)


@obs_app.command("read", cls=Command)
def read(
    observation_id: Annotated[str, typer.Argument(metavar="ID", help="The observation's id.")],
    mode: Annotated[str, typer.Option(help="full | head | tail | range | lines | grep")] = "head",
    n: Annotated[
        int, typer.Option("--n", "-n", metavar="CHARS", help="Characters for head/tail.")
    ] = 2000,
    start: Annotated[
        int | None, typer.Option(metavar="N", help="range: first char; lines: first line.")
    ] = None,
    end: Annotated[
        int | None, typer.Option(metavar="N", help="range: end char (excl.); lines: last line.")
    ] = None,
    pattern: Annotated[
        str | None, typer.Option(metavar="REGEX", help="grep: a regular expression.")
    ] = None,
    context: Annotated[int, typer.Option(metavar="LINES", help="grep: lines of context.")] = 0,
    max_matches: Annotated[int, typer.Option(metavar="N", help="grep: matches to show.")] = 50,
) -> None:
    """Read an observation, or a slice of it."""
    result = with_store(
        lambda s: s.read(
            observation_id,
            mode,
            n=n,
            start=start,
            end=end,
            pattern=pattern,
            context=context,
            max_matches=max_matches,
        )
    )
    console.print(f"[dim]\\[{shown(result.header())}][/dim]")
    print_text(result.content)


@obs_app.command("gc", cls=Command)
def gc() -> None:
    """Delete expired observations."""
    removed = with_store(lambda s: s.gc())
    console.print(f"removed {removed} expired observation{'s' if removed != 1 else ''}")
