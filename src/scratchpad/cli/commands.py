"""The typer group class of the CLI, so that every command fails the same way: a mistake in
the command line, or a file the command cannot read or write, is one line ``error: ...``
with exit code 2, never a traceback."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperGroup

from scratchpad.cli.output import fail

CONTEXT_SETTINGS: dict[str, Any] = {}


class Group(TyperGroup):
    """A command group whose usage errors and file-system errors are one line each."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        with one_line_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with one_line_errors():
            return super().invoke(ctx)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn a usage error (typer's exceptions: a missing argument, a bad value, an unknown
    option or command) and an ``OSError`` nobody handled into ``error: ...`` and an exit."""
    try:
        yield
    except typer.TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # typer prints the help for it
            raise
        message = " ".join(exc.format_message().split()).rstrip(".")
        fail(f"{message}.{_help_hint(exc)}")
        raise typer.Exit(2 if exc.exit_code == 2 else 1) from None
    except OSError as exc:
        if exc.errno == errno.EPIPE:  # the reader went away (`| head`): typer exits quietly
            raise
        fail(describe_os_error(exc))
        raise typer.Exit(2) from None


def describe_os_error(exc: OSError) -> str:
    """An ``OSError`` as a sentence that names the path and says what to check."""
    where = f" {exc.filename}" if exc.filename else ""
    also = f" (and {exc.filename2})" if exc.filename2 else ""
    reason = exc.strerror or str(exc)
    return f"cannot use{where}{also}: {reason}; check the path and its permissions"


def _help_hint(exc: Exception) -> str:
    ctx = getattr(exc, "ctx", None)
    path, names = getattr(ctx, "command_path", None), getattr(ctx, "help_option_names", None)
    return f" See '{path} {names[0]}'." if path and names else ""
