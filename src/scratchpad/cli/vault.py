"""``scratchpad vault``: connections (credentials) for pads, from a terminal.

Values never come from the command line (argv is visible to every user of the machine and
kept in shell history): secret fields are asked for with a hidden prompt, other fields with a
plain one, or all of them come from ``--from-file FILE`` or ``--stdin`` (a JSON object or
``KEY=VALUE`` lines). Field *names* may be on the command line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.table import Table

from scratchpad.cli.commands import Command, Group, not_negative
from scratchpad.cli.output import console, fail, print_json, shown
from scratchpad.cli.vaultclient import VaultAccess, open_vault
from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError, ScratchpadError
from scratchpad.vault.dotenv import parse
from scratchpad.vault.names import looks_secret

vault_app = typer.Typer(
    cls=Group, help="Credentials pads get as DS_* variables (names shown, never values).",
    no_args_is_help=True,
)  # fmt: skip
T = TypeVar("T")

EngineArg = Annotated[str, typer.Argument(metavar="ENGINE", help="e.g. postgres.")]
NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The connection's name.")]
FieldOpt = Annotated[
    list[str] | None,
    typer.Option("--field", metavar="FIELD", help="A field to ask for (repeatable)."),
]
SecretOpt = Annotated[
    list[str] | None,
    typer.Option("--secret", metavar="FIELD", help="A secret field, asked for hidden."),
]
FileOpt = Annotated[
    Path | None,
    typer.Option("--from-file", metavar="FILE", help="Values as JSON or KEY=VALUE lines."),
]
StdinOpt = Annotated[bool, typer.Option("--stdin", help="Values from standard input.")]


def with_vault(job: Callable[[VaultAccess], T]) -> T:
    """Run ``job`` on this home's vault; errors as one line, exit 2."""
    try:
        return job(open_vault(Settings.load()))
    except ScratchpadError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None


def parse_values(text: str, source: str) -> dict[str, str]:
    """Values from a JSON object or from KEY=VALUE lines."""
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InvalidInputError(f"{source} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidInputError(f"{source} must hold a JSON object of field → value")
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}
    return parse(text, source)


def given_values(from_file: Path | None, stdin: bool) -> dict[str, str]:
    if from_file is not None and stdin:
        raise InvalidInputError("give values with --from-file or --stdin, not both")
    if from_file is not None:
        return parse_values(from_file.read_text(encoding="utf-8"), str(from_file))
    if stdin:
        return parse_values(sys.stdin.read(), "standard input")
    return {}


def secret_fields(fields: list[str], secrets: list[str]) -> list[str] | None:
    """secure_keys for a save: the named secrets plus the name heuristic (None: heuristic)."""
    if not secrets:
        return None
    return sorted(set(secrets) | {f for f in fields if looks_secret(f)})


def ask(field: str, secret: bool, current: str | None = None) -> str:
    """One value from the terminal: hidden for secrets; Enter keeps ``current``."""
    if secret:
        hint = " (Enter keeps it)" if current is not None else ""
        value = typer.prompt(f"{field}{hint}", default=current or "", hide_input=True,
                             show_default=False)  # fmt: skip
        return str(value)
    return str(typer.prompt(field, default=current if current is not None else ""))


@vault_app.command("ls", cls=Command)
def ls(as_json: Annotated[bool, typer.Option("--json", help="As JSON.")] = False) -> None:
    """List the connections (names, fields, secret fields; never values).

    --json adds their variables.
    """
    entries = with_vault(lambda v: v.list())
    if as_json:
        print_json(entries)
        return
    if not entries:
        console.print("no connections; add one with: scratchpad vault add ENGINE")
        return
    table = Table("engine", "name", "fields", "secret", "updated")
    for entry in entries:
        if "error" in entry:
            table.add_row(shown(entry["engine"]), shown(entry["name"]),
                          f"[red]{shown(entry['error'])}[/red]", "", "")  # fmt: skip
            continue
        table.add_row(
            shown(entry["engine"]),
            shown(entry["name"]),
            shown(", ".join(entry["fields"])),
            shown(", ".join(entry["secure_keys"])),
            shown(entry["updated_at"]),
        )
    console.print(table)


@vault_app.command("add", cls=Command)
def add(
    engine: EngineArg,
    name: Annotated[
        str | None, typer.Argument(metavar="NAME", help="Default: the next free number.")
    ] = None,
    field: FieldOpt = None,
    secret: SecretOpt = None,
    from_file: FileOpt = None,
    stdin: StdinOpt = False,
) -> None:
    """Save a connection; asks for each --field / --secret not given by file or stdin."""
    fields, secrets = list(field or []), list(secret or [])

    def job(vault: VaultAccess) -> dict[str, Any]:
        values = given_values(from_file, stdin)
        names = list(dict.fromkeys([*values, *fields, *secrets]))
        if not names:
            raise InvalidInputError(
                "no fields given: name them with --field NAME / --secret NAME, or give values "
                "with --from-file FILE or --stdin"
            )
        for each in names:
            if each not in values:
                if stdin:
                    raise InvalidInputError(f"field {each!r} is not on standard input")
                values[each] = ask(each, each in secrets or looks_secret(each))
        return vault.save(engine, name, values, secret_fields(names, secrets))

    record = with_vault(job)
    console.print(f"saved {shown(record['engine'])}/{shown(record['name'])}")


@vault_app.command("show", cls=Command)
def show(engine: EngineArg, name: NameArg) -> None:
    """Show a connection, its secrets masked."""
    print_json(with_vault(lambda v: v.record(engine, name)))


@vault_app.command("edit", cls=Command)
def edit(
    engine: EngineArg,
    name: NameArg,
    field: FieldOpt = None,
    secret: SecretOpt = None,
    remove: Annotated[
        list[str] | None, typer.Option("--remove", metavar="FIELD", help="Clear a field.")
    ] = None,
    from_file: FileOpt = None,
    stdin: StdinOpt = False,
) -> None:
    """Change a connection. Without options, asks for every field (Enter keeps it)."""
    asked, secrets, removed = list(field or []), list(secret or []), list(remove or [])

    def job(vault: VaultAccess) -> dict[str, Any]:
        record = vault.record(engine, name)
        values: dict[str, str] = dict(record["fields"])
        given = given_values(from_file, stdin)
        values.update(given)
        everything = not (asked or secrets or removed or given)
        for each in list(values) if everything else [*asked, *secrets]:
            if each not in given:
                hidden = each in record["secure_keys"] or each in secrets or looks_secret(each)
                values[each] = ask(each, hidden, values.get(each))
        values.update(dict.fromkeys(removed, ""))
        return vault.save(engine, name, values, secret_fields(list(values), secrets))

    record = with_vault(job)
    console.print(f"saved {shown(record['engine'])}/{shown(record['name'])}")


@vault_app.command("rm", cls=Command)
def rm(engine: EngineArg, name: NameArg) -> None:
    """Delete a connection (pads that had it lose its variables)."""
    with_vault(lambda v: v.delete(engine, name))
    console.print(f"removed {shown(engine)}/{shown(name)}")


PadArg = Annotated[str, typer.Argument(metavar="PAD", help="Pad name, e.g. 'main'.")]


@vault_app.command("grant", cls=Command)
def grant(pad: PadArg, engine: EngineArg, name: NameArg) -> None:
    """Give a pad a connection."""
    show_grants(pad, with_vault(lambda v: v.grant(pad, engine, name)))


@vault_app.command("revoke", cls=Command)
def revoke(pad: PadArg, engine: EngineArg, name: NameArg) -> None:
    """Take a connection from a pad."""
    show_grants(pad, with_vault(lambda v: v.revoke(pad, engine, name)))


def show_grants(pad: str, connections: list[tuple[str, str]]) -> None:
    listed = ", ".join(f"{e}/{n}" for e, n in connections) or "no connections"
    console.print(f"pad {shown(pad)} gets: {shown(listed)}")


@vault_app.command("audit", cls=Command)
def audit(
    limit: Annotated[
        int,
        typer.Option(
            "--limit", metavar="N", callback=not_negative, help="Lines to show (the last N)."
        ),
    ] = 50,
) -> None:
    """The audit log: which pad got which connection, and every change (names only)."""
    for entry in with_vault(lambda v: v.audit(limit)):
        pad = f" pad={entry['pad']}" if "pad" in entry else ""
        line = f"{entry.get('at', '')} {entry.get('event', '')}{pad} "
        console.print(shown(line + f"{entry.get('engine', '')}/{entry.get('name', '')}"))
