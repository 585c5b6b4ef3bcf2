"""``scratchpad vault connect ENGINE`` and ``scratchpad vault test ENGINE NAME``: the credential
form and its probe in a terminal.

``connect`` asks for the engine's fields (hidden input for secret ones; Enter skips an
optional field), submits them to the probe (this home's server when one runs, else here),
shows what the probe does, and on success the connection is saved. When the probe asks for
more fields, or a field is wrong, it asks for those and submits again. The form is kept the
way the web panel keeps it: every patch block of the stream is merged into it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import click
import typer

from scratchpad.cli.commands import Command
from scratchpad.cli.output import console, shown
from scratchpad.cli.vault import (
    EngineArg,
    FieldOpt,
    FileOpt,
    NameArg,
    SecretOpt,
    StdinOpt,
    given_values,
    vault_app,
    with_vault,
)
from scratchpad.cli.vaultclient import VaultAccess, open_vault
from scratchpad.config import Settings
from scratchpad.errors import InvalidInputError, ScratchpadError
from scratchpad.vault.engines import engine_form, get_engine
from scratchpad.vault.forms import (
    FORM_BLOCK,
    check_spec,
    fields_of,
    find_blocks,
    is_secret_field,
    merge_patch,
    method_of,
)
from scratchpad.vault.names import check_name

MAX_ROUNDS = 5
BLOCK_RE = re.compile(r"\n?```data-vault-form(?:-patch)?\n.*?\n```\n?", re.DOTALL)
RESULT_LINES = 6
FINAL = ("response.completed", "response.failed")


class TerminalForm:
    """A form on a terminal: patched by the stream, filled in by the person."""

    def __init__(self, form: dict[str, Any] | None, name: str | None = None) -> None:
        self.form = check_spec(form) if form is not None else {}  # None: shown, not filled
        self.name = name  # what a success is saved as (None: the next number)
        self.values: dict[str, str] = {}
        self.skipped: list[str] = []
        self.status = ""  # how the last round ended
        self.response: dict[str, Any] = {}  # the last round's final response
        self.submission_id = ""  # of the last round

    def fields(self) -> list[dict[str, Any]]:
        method = method_of(self.form)
        return fields_of(self.form, None if method is None else str(method["id"]))

    def body(self) -> dict[str, Any]:
        names = {f["name"] for f in self.fields()}
        return {
            "form_id": self.form["form_id"],
            "form_spec": self.form,
            "values": {k: v for k, v in self.values.items() if k in names},
            "skipped": [n for n in self.skipped if n in names],
            **({"connection_name": self.name} if self.name is not None else {}),
        }

    def follow(self, event: dict[str, Any]) -> None:
        """Show one event of the stream; merge its patches into the form."""
        kind = event.get("type")
        if kind == "response.created":
            self.submission_id = str((event.get("response") or {}).get("submission_id", ""))
        if kind == "response.output_text.delta":
            self._delta(str(event.get("delta", "")))
        elif kind == "response.in_progress":
            _thought(str(event.get("thought_role", "")), event.get("thought") or {})
        elif kind in FINAL:
            response = event.get("response") or {}
            self.response = response
            self.status = str(response.get("status", "failed"))
            if kind == "response.failed":  # a verdict was told in the stream's text already
                console.print(f"[red]{shown(outcome_text(response))}[/red]")

    def _delta(self, text: str) -> None:
        for kind, block in find_blocks(text):
            before = {f["name"]: f.get("status") for f in self.fields()}
            before_status = self.form.get("status_text")
            self.form = block if kind == FORM_BLOCK else merge_patch(self.form, block)
            status = self.form.get("status_text")
            if status and status != before_status:
                console.print(f"[dim]· {shown(status)}[/dim]")
            for field in self.fields():
                if field.get("status") and field.get("status") != before.get(field["name"]):
                    console.print(f"[dim]· {shown(field['name'])}: {shown(field['status'])}[/dim]")
        prose = BLOCK_RE.sub("", text)
        if prose.strip():
            console.print(shown(prose), end="")

    def ask(self, interactive: bool) -> int:
        """Ask for every field without a value yet, or with an error to fix; how many."""
        self._choose_method(interactive)
        asked = 0
        for field in self.fields():
            name = field["name"]
            if name in self.skipped and not field.get("error"):
                continue
            if self.values.get(name) and not field.get("error"):
                continue
            if not interactive:
                if field.get("required") and name not in self.values:
                    raise InvalidInputError(f"field {name!r} is not on standard input")
                continue
            self._ask_field(field)
            asked += 1
        return asked

    def _choose_method(self, interactive: bool) -> None:
        methods = self.form.get("methods") or []
        if not methods or method_of(self.form) is not None:
            return
        ids = [str(m["id"]) for m in methods]
        if not interactive:
            raise InvalidInputError(f"choose a method: {', '.join(ids)}")
        for method in methods:
            console.print(f"  {shown(method['id'])}: {shown(method.get('description', ''))}")
        choice = ""
        while choice not in ids:
            choice = str(typer.prompt(f"method ({', '.join(ids)})", default=ids[0]))
        self.form = {**self.form, "auth_method": choice, "selected_method": choice}

    def _ask_field(self, field: dict[str, Any]) -> None:
        name = field["name"]
        label = str(field.get("label") or name)
        for note in (field.get("error"), field.get("help")):
            if note:
                console.print(f"[dim]{shown(label)}: {shown(note)}[/dim]")
                break
        optional = not field.get("required") and field.get("skipable", True)
        default = field.get("default")
        if optional:
            label += " (optional)" if default is not None else " (optional, Enter skips)"
        if field.get("type") == "boolean":
            value = "true" if typer.confirm(label, default=bool(default)) else "false"
        elif field.get("type") == "textarea":
            value = _lines(label, hidden=is_secret_field(field))
        else:
            value = str(typer.prompt(label, default="" if default is None else str(default),
                                     hide_input=is_secret_field(field),
                                     show_default=not is_secret_field(field)))  # fmt: skip
        if value == "" and optional:
            self.skipped.append(name)
            self.values.pop(name, None)
        else:
            self.values[name] = value
            self.skipped = [n for n in self.skipped if n != name]


def _lines(label: str, *, hidden: bool) -> str:
    """A value of several lines (a key file, a JSON document): pasted and ended with a line
    holding only '.', or read from a file given as @PATH. No line of it is left over for
    the next prompt (or a chat's next message)."""
    console.print(f"{shown(label)}: paste it and end with a line holding only '.', "
                  "or give @FILE to read it from a file")  # fmt: skip
    lines: list[str] = []
    while True:
        line = str(typer.prompt("", default="", show_default=False, hide_input=hidden,
                                prompt_suffix="> " if not hidden else ""))  # fmt: skip
        if not lines and line.startswith("@"):
            try:
                return Path(line[1:]).expanduser().read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise InvalidInputError(f"cannot read {line[1:]!r}: {exc}") from None
        if line == ".":
            return "\n".join(lines)
        lines.append(line)


def rounds(form: TerminalForm, vault: VaultAccess, *, interactive: bool) -> str:
    """Ask, submit, and again while the probe wants fields fixed or added; how it ended."""
    for number in range(MAX_ROUNDS):
        if form.ask(interactive) == 0 and number > 0:
            console.print("[yellow]the probe asked again for fields already filled in[/yellow]")
            break
        vault.submit(form.body(), form.follow)
        if form.status not in ("retry", "needs_input") or not interactive:
            break
    return form.status


def outcome_text(response: dict[str, Any]) -> str:
    """What a final response says: its text, or its error's message."""
    error = response.get("error")
    message = error.get("message", "") if isinstance(error, dict) else error
    return str(response.get("output_text") or message or "")


def fill_requested_form(spec: dict[str, Any], settings: Settings) -> str:
    """A form a conversation's model asked for, filled in on this terminal and probed; what
    the model is told of it (names and the outcome, never a value). Run it on the main
    thread: Ctrl-C stops waiting for the probe (which may still finish on the server)."""
    form: TerminalForm | None = None
    try:
        form = TerminalForm(spec)
        console.print(f"[bold]{shown(form.form['title'])}[/bold] (the model never sees values)")
        vault = open_vault(settings)
        vault.ready()
        status = rounds(form, vault, interactive=True)
    except (ScratchpadError, click.Abort, KeyboardInterrupt) as exc:
        sent = form.submission_id if form is not None else ""
        after = f" (submission {sent} may still be probed and saved)" if sent else ""
        console.print()
        return f"[The credential form was not completed: {str(exc) or 'cancelled'}{after}]"
    response, body = form.response, form.body()
    filled = ", ".join(n for n, v in body["values"].items() if v) or "none"
    outcome = outcome_text(response)
    return (
        f"[The person submitted credential form {form.form['form_id']} (submission "
        f"{form.submission_id or '?'}; fields: {filled}; skipped: "
        f"{', '.join(body['skipped']) or 'none'}). Result: {status}. {outcome}]"
    )


def _thought(role: str, thought: dict[str, Any]) -> None:
    if role == "scratchpad.start":
        what = thought.get("description") or thought.get("action") or "cell"
        console.print(f"[cyan]▸ {shown(what)}[/cyan]")
    elif role == "scratchpad.result":
        lines = str(thought.get("text", "")).strip().splitlines()
        for line in lines[:RESULT_LINES]:
            console.print(f"[dim]  {shown(line)}[/dim]")
        if len(lines) > RESULT_LINES:
            console.print(f"[dim]  … {len(lines) - RESULT_LINES} more lines[/dim]")


def _form_for(engine: str, fields: list[str], secrets: list[str]) -> dict[str, Any]:
    if fields or secrets:
        return {
            "engine": engine,
            "title": f"Connect to {engine}",
            "fields": [{"name": n, "type": "password" if n in secrets else "text",
                        "required": True} for n in dict.fromkeys([*fields, *secrets])],
        }  # fmt: skip
    if get_engine(engine) is None:
        raise InvalidInputError(
            f"{engine!r} is not a known engine: name its fields with --field NAME and "
            "--secret NAME (or pick a known engine)"
        )
    return engine_form(engine)


NameOpt = Annotated[
    str | None,
    typer.Option("--name", help="Save the connection as NAME (default: the next number)."),
]


@vault_app.command("connect", cls=Command)
def connect(
    engine: EngineArg,
    name: NameOpt = None,
    field: FieldOpt = None,
    secret: SecretOpt = None,
    from_file: FileOpt = None,
    stdin: StdinOpt = False,
) -> None:
    """Add a connection that works: asks for its fields, tests them, saves them on success.

    The engine's fields (or --field / --secret of a custom engine) are tested with the probe
    and saved as --name NAME when given.
    """

    def job(vault: VaultAccess) -> str:
        _check_free(vault, engine, name)
        form = TerminalForm(_form_for(engine, list(field or []), list(secret or [])), name)
        given = given_values(from_file, stdin)
        unknown = sorted(set(given) - {f["name"] for f in form.fields()})
        if unknown:
            known = ", ".join(f["name"] for f in form.fields())
            raise InvalidInputError(f"no field {', '.join(unknown)} in this form (fields: {known})")
        form.values.update(given)
        vault.ready()  # the probe's model, before anyone types a secret
        return rounds(form, vault, interactive=not stdin)

    if with_vault(job) != "success":
        raise typer.Exit(1)


def _check_free(vault: VaultAccess, engine: str, name: str | None) -> None:
    """A name that is valid and not taken yet, before anyone types a secret."""
    if name is None:
        return
    check_name(name, "connection name")
    if any(e["engine"] == engine and e["name"] == name for e in vault.list()):
        raise InvalidInputError(
            f"a connection {engine}/{name} exists already: choose another --name (test that one "
            f"with `scratchpad vault test {engine} {name}`)"
        )


@vault_app.command("test", cls=Command)
def test(engine: EngineArg, name: NameArg) -> None:
    """Test a saved connection with the probe (nothing is changed); exit 1 when it fails."""
    form = TerminalForm(None)
    with_vault(lambda vault: vault.test(engine, name, form.follow))
    if form.status != "success":
        raise typer.Exit(1)
