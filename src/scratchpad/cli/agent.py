"""``scratchpad agent``: create, run and inspect an agent directory (see scratchpad.memory).

``run --model`` takes ``provider:model`` (through ``create_provider``), or
``scripted:FILE``: a JSON list of replies played back in order (objects are sent as their
JSON text), for tests and demos without an API key. A ``scripted:FILE`` named by config.yaml
or ``SCRATCHPAD_MODEL`` means the same (see ``model_from_spec``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.table import Table

from scratchpad.cli.commands import Command, Group, not_negative
from scratchpad.cli.output import console, err_console, fail, print_text, shown
from scratchpad.errors import ScratchpadError

if TYPE_CHECKING:  # the memory package is imported by the commands that need it
    from scratchpad.memory.cycle import CycleAgent, CycleResult
    from scratchpad.memory.layout import AgentPaths
    from scratchpad.memory.report import AgentStatus, HistoryEntry
    from scratchpad.memory.snapshots import Which

agent_app = typer.Typer(
    cls=Group,
    help="Agents with durable YAML state that run in wake → run → sleep cycles.",
    no_args_is_help=True,
)
T = TypeVar("T")
RootArg = Annotated[Path, typer.Argument(help="The agent directory.")]
MODEL_HELP = (
    "The model (else config.yaml's model, else SCRATCHPAD_MODEL), or scripted:FILE: "
    "a JSON list of replies played in order (tests and demos)."
)
OUTCOME_COLOURS = {"done": "green", "max_iterations": "yellow", "failed": "red"}


def guarded(job: Callable[[], T]) -> T:
    """Run ``job``; a Scratchpad error is printed and exits with code 2."""
    try:
        return job()
    except ScratchpadError as exc:
        fail(str(exc))
        raise typer.Exit(2) from None


@agent_app.command(cls=Command)
def init(root: RootArg) -> None:
    """Create an agent directory (rules, config, state, logs, and the pads' workspace).

    Makes RULES.md, config.yaml, scratchpad/active.yaml, logs/ and workspace/ (where its pads
    and shell work).
    """
    from scratchpad.memory.layout import init_agent

    try:
        paths, written = guarded(lambda: init_agent(root))
    except OSError as exc:
        fail(
            f"cannot create the agent directory {root}: {exc.strerror}; choose a path whose "
            "parent directories exist and can be written"
        )
        raise typer.Exit(2) from None
    for path in written:
        console.print(f"created {path.relative_to(paths.root)}", markup=False)
    if not written:
        console.print(f"{paths.root} is already an agent directory; nothing changed", markup=False)
    console.print(
        f"edit {paths.rules} and {paths.active}, then: scratchpad agent run {root}", markup=False
    )


@agent_app.command(cls=Command)
def run(
    root: RootArg,
    cycles: Annotated[
        int,
        typer.Option(callback=not_negative, metavar="N", help="Cycles to run (0: until Ctrl-C)."),
    ] = 1,
    every: Annotated[
        float,
        typer.Option(
            callback=not_negative, metavar="SECONDS", help="Seconds from one start to the next."
        ),
    ] = 0,
    model: Annotated[str | None, typer.Option(metavar="PROVIDER:MODEL", help=MODEL_HELP)] = None,
) -> None:
    """Run cycles: wake, let the model work on the state, sleep. Exit 1 if one failed."""
    agent = guarded(lambda: build_agent(root, model))
    failed: list[CycleResult] = []

    def report(result: CycleResult) -> None:
        show_result(agent.paths, result)
        if result.outcome == "failed":
            failed.append(result)

    try:
        guarded(lambda: agent.run_cycles(cycles or None, every_s=every, on_result=report))
    except KeyboardInterrupt:
        fail("interrupted")
        raise typer.Exit(130) from None
    if failed:
        raise typer.Exit(1)


def build_agent(root: Path, spec: str | None) -> CycleAgent:
    """The agent of ``root`` with the model named by ``spec``, config.yaml, or the setting."""
    from scratchpad.memory.config import load_config
    from scratchpad.memory.cycle import CycleAgent
    from scratchpad.memory.layout import AgentPaths
    from scratchpad.memory.models import model_from_spec

    paths = AgentPaths.of(root).require()
    config = load_config(paths.config)
    return CycleAgent(paths.root, model_from_spec(spec or config.model), config=config)


def show_result(paths: AgentPaths, result: CycleResult) -> None:
    colour = OUTCOME_COLOURS.get(result.outcome, "white")
    line = (
        f"cycle {shown(result.cycle_id)}: [{colour}]{result.outcome}[/{colour}] "
        f"after {result.iterations} step(s)"
    )
    if result.summary:
        line += f": {shown(result.summary)}"
    console.print(line)
    if result.error:
        log = paths.cycle_log(result.cycle_id)
        err_console.print(f"[red]{shown(result.error)}[/red] (traceback in {shown(str(log))})")


@agent_app.command(cls=Command)
def status(root: RootArg) -> None:
    """Goals, current task, pending actions, and the last cycle with how it ended."""
    from scratchpad.memory.layout import AgentPaths
    from scratchpad.memory.report import agent_status

    show_status(guarded(lambda: agent_status(AgentPaths.of(root))))


def show_status(found: AgentStatus) -> None:
    state = found.state
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("agent", shown(str(found.root)) + ("  (a cycle is running)" * found.running))
    grid.add_row("goals", _items(state.get("goals")))
    grid.add_row("current task", shown(_text(state.get("current_task"))))
    grid.add_row("pending", _items(state.get("pending_actions"), numbered=True))
    grid.add_row("completed", f"{len(state.get('completed_tasks') or [])} task(s)")
    grid.add_row("last updated", shown(str(state.get("last_updated") or "never")))
    grid.add_row("last cycle", _last_cycle(found))
    notes = str(state.get("notes") or "").strip().splitlines()[-5:]
    grid.add_row("notes (end)", shown("\n".join(notes)) or "-")
    console.print(grid)


def _items(value: object, *, numbered: bool = False) -> str:
    if not isinstance(value, list) or not value:
        return "-"
    marks = [f"{n}." if numbered else "-" for n in range(1, len(value) + 1)]
    return "\n".join(
        f"{mark} {shown(_text(item))}" for mark, item in zip(marks, value, strict=True)
    )


def _text(value: object) -> str:
    return "-" if value is None else value if isinstance(value, str) else repr(value)


def _last_cycle(found: AgentStatus) -> str:
    last = found.last
    if last is None:
        return "none yet"
    colour = OUTCOME_COLOURS.get(last.outcome, "white")
    text = f"{shown(last.cycle_id)}: [{colour}]{shown(last.outcome)}[/{colour}]"
    if last.iterations is not None:
        text += f" after {last.iterations} step(s)"
    if last.detail:
        text += f" — {shown(last.detail)}"
    return text + f"  ({found.cycles} cycle(s) in all)"


@agent_app.command(cls=Command)
def diff(
    root: RootArg,
    cycle: Annotated[str | None, typer.Argument(help="Cycle id (default: the last).")] = None,
) -> None:
    """What a cycle changed: its _before and _after states as a unified diff."""
    from scratchpad.memory.layout import AgentPaths
    from scratchpad.memory.snapshots import diff as cycle_diff

    found = guarded(lambda: cycle_diff(AgentPaths.of(root).require(), cycle))
    if not found.changed_keys:
        print_text(f"cycle {found.cycle_id} changed nothing")
        return
    print_text(f"cycle {found.cycle_id} changed: {', '.join(found.changed_keys)}")
    for line in found.text.splitlines():
        style = _diff_style(line)
        console.print(f"[{style}]{shown(line)}[/{style}]" if style else shown(line))


def _diff_style(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "bold"
    if line.startswith("@@"):
        return "cyan"
    return {"+": "green", "-": "red"}.get(line[:1], "")


@agent_app.command(cls=Command)
def history(root: RootArg) -> None:
    """Every cycle with its outcome: done, max_iterations or failed."""
    from scratchpad.memory.layout import AgentPaths
    from scratchpad.memory.report import cycle_history

    entries = guarded(lambda: cycle_history(AgentPaths.of(root).require()))
    if not entries:
        console.print("no cycles yet; run one with: scratchpad agent run ROOT")
        return
    table = Table()
    for name in ("cycle", "outcome", "steps", "snapshots"):  # ids are never cut
        table.add_column(name, no_wrap=True)
    table.add_column("summary / error", overflow="fold")
    for entry in entries:
        table.add_row(*_history_row(entry))
    console.print(table)


def _history_row(entry: HistoryEntry) -> list[str]:
    colour = OUTCOME_COLOURS.get(entry.outcome, "magenta")
    return [
        shown(entry.cycle_id),
        f"[{colour}]{shown(entry.outcome)}[/{colour}]",
        "" if entry.iterations is None else str(entry.iterations),
        entry.snapshots,
        shown(entry.detail),
    ]


@agent_app.command(cls=Command)
def restore(
    root: RootArg,
    cycle: Annotated[str, typer.Argument(help="Cycle id, or a saved prerestore_/prereset_ name.")],
    before: Annotated[
        bool, typer.Option("--before/--after", help="Which snapshot of the cycle.")
    ] = False,
) -> None:
    """Make active.yaml a snapshot; the current one is saved first (prerestore_<time>)."""
    from scratchpad.memory.clock import local_now
    from scratchpad.memory.layout import AgentPaths
    from scratchpad.memory.snapshots import restore as restore_state

    paths = AgentPaths.of(root)
    which: Which = "before" if before else "after"
    saved = guarded(lambda: restore_state(paths, cycle, which, local_now()))
    console.print(f"active.yaml restored from {cycle} ({which})", markup=False)
    if saved is not None:
        console.print(
            f"the previous active.yaml was saved as {saved.name}; undo with: "
            f"scratchpad agent restore {root} {saved.stem}",
            markup=False,
        )


@agent_app.command(cls=Command)
def reset(root: RootArg) -> None:
    """Remove active.yaml: the next cycle starts from the default state. Snapshots stay."""
    from scratchpad.memory.clock import local_now
    from scratchpad.memory.layout import AgentPaths
    from scratchpad.memory.snapshots import reset as reset_state

    saved = guarded(lambda: reset_state(AgentPaths.of(root), local_now()))
    if saved is None:
        console.print("there was no active.yaml; nothing to reset")
        return
    console.print(
        f"removed active.yaml (saved as {saved.name}); the next cycle starts from the default "
        "state; snapshots are kept",
        markup=False,
    )
