"""How the CLI shows cells and events on a terminal (rich), and nothing else."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

from scratchpad.runtime.cell import Cell, DisplayEvent, OutputEvent, ProgressEvent, StreamItem
from scratchpad.runtime.render import describe_output

console = Console(highlight=False, soft_wrap=True)  # the terminal wraps; pipes get whole lines
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

# What json.dumps(ensure_ascii=False) leaves raw that a terminal could act on or not encode.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\ud800-\udfff]")


def print_json(data: Any) -> None:
    """``data`` as JSON on stdout, for scripts: exact values, no raw control characters.

    ``json.dumps`` escapes C0 controls; DEL, C1 controls and lone surrogates (which it would
    leave raw) are written as ``\\uXXXX`` escapes too, so the JSON decodes to the same value.
    """
    text = json.dumps(data, ensure_ascii=False, indent=2)
    sys.stdout.write(_JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n")
    sys.stdout.flush()


def show_event(item: StreamItem) -> None:
    """Live output while a cell runs: stdout/stderr as they come, progress dimmed."""
    if isinstance(item, OutputEvent):
        stream = sys.stdout if item.stream == "stdout" else sys.stderr
        stream.write(item.text)
        stream.flush()
    elif isinstance(item, ProgressEvent):
        err_console.print(f"[dim]… {escape(item.message)}[/dim]")
    elif isinstance(item, DisplayEvent):
        err_console.print(f"[cyan]\\[output][/cyan] {escape(describe_output(item.data))}")


def show_cell_end(cell: Cell) -> None:
    """What a terminal needs after the streamed output: result, error, status."""
    if cell.result is not None:
        console.print(f"[green]Out:[/green] {escape(cell.result)}")
    if cell.error:
        err_console.print(f"[red]{escape(cell.error.rstrip())}[/red]")
    colour = "green" if cell.ok else "red"
    err_console.print(f"[{colour}]\\[{cell.status}][/{colour}] [dim]{cell.duration_s:.3f}s[/dim]")


def fail(message: str) -> None:
    err_console.print(f"[red]error:[/red] {escape(message)}")
