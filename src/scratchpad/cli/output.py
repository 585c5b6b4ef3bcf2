"""How the CLI shows cells, events and errors on a terminal (rich), and nothing else.

Every piece of text that came from a cell, a model or a server goes through :func:`safe_text`
(or :func:`shown`, its markup-escaped form) before it is printed, so that nothing a cell
prints can drive the terminal.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape

from scratchpad.runtime.cell import Cell, DisplayEvent, OutputEvent, ProgressEvent, StreamItem
from scratchpad.runtime.render import describe_output
from scratchpad.scrub import scrub

# The terminal wraps; pipes get whole lines. No emoji codes: ":x:" in cell text stays ":x:".
console = Console(highlight=False, soft_wrap=True, emoji=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

# C0 controls but newline and tab, DEL, C1 controls; and lone surrogates, which cannot be written.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# CappedOutput's note where it dropped the middle of an oversized stream (runtime/cell.py).
_DROPPED_NOTE = re.compile(
    r"\n\[\.\.\. \d+ bytes of output dropped \(kept the first and last part\) \.\.\.\]\n"
)
# What json.dumps(ensure_ascii=False) leaves raw that a terminal could act on or not encode.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\ud800-\udfff]")


def safe_text(text: str) -> str:
    """``text`` with every terminal control character made visible, for printing.

    A cell (or a model, or a server) decides what it prints, and a terminal acts on control
    sequences: ``ESC ] 0 ; title BEL`` renames the window, ``ESC [ 2 J`` clears the screen,
    cursor movement and ``\\r`` can overwrite what was printed with something else. So every
    C0 control character but newline and tab, DEL and every C1 control is shown as its escape
    (``\\x1b``, ``\\x07``, ``\\x9b``), each one alone, so a sequence split across two
    chunks of streamed output is made harmless too. A lone surrogate (which no terminal
    encoding can write) becomes U+FFFD. Everything else, all of Unicode, is kept as it is.

    It is applied always, not only when the output is a terminal: the CLI is an agent's tool,
    its output is often piped into something that shows it on a terminal later, and one
    command should print the same text wherever its output goes. ``--json`` output does not
    use it: JSON escapes control characters itself (see :func:`print_json`), so values come
    through exact and still harmless.

    The process's scrubber runs over it too: text a model wrote (an agent's summary) never
    passed a pad's, and cell text that did is unchanged by a second pass.
    """
    return _UNSAFE.sub(_visible, scrub(text))


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    return "\ufffd" if "\ud800" <= char <= "\udfff" else f"\\x{ord(char):02x}"


def shown(text: object) -> str:
    """``text`` made safe (:func:`safe_text`) and escaped for rich markup."""
    return escape(safe_text(str(text)))


def print_text(text: str, *, err: bool = False) -> None:
    """Text from a cell, a model or a server, printed as it is (no markup, tabs kept), but
    made safe, and ended with a newline."""
    stream = sys.stderr if err else sys.stdout
    stream.write(safe_text(text) + "\n")
    stream.flush()


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
        _write(sys.stdout if item.stream == "stdout" else sys.stderr, item.text)
    elif isinstance(item, ProgressEvent):
        err_console.print(f"[dim]… {shown(item.message)}[/dim]")
    elif isinstance(item, DisplayEvent):
        err_console.print(f"[cyan]\\[output][/cyan] {shown(describe_output(item.data))}")


def show_cell_end(cell: Cell) -> None:
    """What a terminal needs after the streamed output: result, error, status."""
    if cell.result is not None:
        console.print(f"[green]Out:[/green] {shown(cell.result)}")
    if cell.error:
        err_console.print(f"[red]{shown(cell.error.rstrip())}[/red]")
    colour = "green" if cell.ok else "red"
    number = f"cell {cell.number} · " if cell.number else ""
    err_console.print(
        f"[{colour}]\\[{cell.status}][/{colour}] [dim]{number}{cell.duration_s:.3f}s[/dim]"
    )


class LiveCell:
    """One running cell on a terminal: its events as they come, then what of its stored
    output was not streamed, then its end. The runtime streams only the head of an oversized
    stream (the stored cell keeps the head, a note of what was dropped, and the tail), so
    without this the terminal would show a cut stream and no sign of the cut."""

    def __init__(self) -> None:
        self._streamed: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._progress: list[str] = []

    def event(self, item: StreamItem) -> None:
        if isinstance(item, OutputEvent):
            self._streamed[item.stream].append(item.text)
        elif isinstance(item, ProgressEvent):
            self._progress.append(item.message)
        show_event(item)

    def end(self, cell: Cell) -> None:
        for name, stored, stream in (
            ("stdout", cell.stdout, sys.stdout),
            ("stderr", cell.stderr, sys.stderr),
        ):
            rest = unseen_rest(stored, "".join(self._streamed[name]))
            if rest:
                _write(stream, rest if rest.endswith("\n") else rest + "\n")
        logged = unseen_logs(cell.logs, self._progress)
        if logged:
            err_console.print(f"[dim]\\[logs] {shown(logged)}[/dim]")
        show_cell_end(cell)


def unseen_logs(logs: str, shown_progress: list[str]) -> str:
    """The lines of a cell's logs the terminal has not shown: its ``logging`` records and the
    runtime's notes, not the progress messages that streamed (each passed over once)."""
    left = Counter(line for message in shown_progress for line in message.splitlines())
    rest = []
    for line in logs.splitlines():
        if left[line] > 0:
            left[line] -= 1
        else:
            rest.append(line)
    return "\n".join(rest).strip("\n")


def unseen_rest(stored: str, streamed: str) -> str:
    """What of a cell's stored stream was not streamed: what follows the streamed part, or
    (when the two disagree) the dropped-bytes note and the tail after it, else nothing."""
    if stored.startswith(streamed):
        return stored[len(streamed) :]
    note = _DROPPED_NOTE.search(stored)
    return stored[note.start() :] if note else ""


def _write(stream: TextIO, text: str) -> None:
    stream.write(safe_text(text))
    stream.flush()


def fail(message: str) -> None:
    """One line on stderr: ``error: ...`` (the message says what to do)."""
    err_console.print(f"[red]error:[/red] {shown(message)}")
