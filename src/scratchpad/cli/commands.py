"""The typer command and group classes of the CLI, so that every command looks and fails the
same way: help without type noise (flags as plain flags, arguments and values by their
metavar: ``PAD``, ``[CODE]``, ``--file FILE``), ``-h`` beside ``--help``, and a mistake in the
command line, or a file the command cannot read or write, as one line ``error: ...`` with exit
code 2, never a traceback. Every command is declared with ``cls=Command``; every ``Typer`` with
``cls=Group``."""

from __future__ import annotations

import errno
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from scratchpad.cli.output import fail
from scratchpad.errors import DiskFullError, InvalidInputError

_Number = TypeVar("_Number", int, float)

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}  # inherited


class _Tidy:
    """Help without types for the parameters of a command or group: see :func:`tidy`."""

    params: list[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            tidy(param)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        tidy(option)
        return option


class Command(_Tidy, TyperCommand):
    """A command whose help shows no types."""


class Group(_Tidy, TyperGroup):
    """A command group whose help shows no types, and whose usage errors and file-system
    errors are one line each."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        with one_line_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with one_line_errors():
            return super().invoke(ctx)


class PlainArgument(TyperArgument):
    """An argument shown by its metavar alone (typer adds ``<str>`` and ``{pad}``)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        name = self.metavar or ""
        return [name if self.required else f"[{name}]"]


def tidy(param: object) -> None:
    """Make one parameter's help plain: a flag shows no value, an option or argument without
    a metavar gets its name in capitals (``--port PORT``, ``PAD``, ``PACKAGES...``)."""
    if isinstance(param, TyperArgument):
        if param.metavar is None:
            param.metavar = (param.name or "value").upper() + ("..." if param.nargs != 1 else "")
        param.__class__ = PlainArgument  # same fields, plainer display
    elif isinstance(param, TyperOption):
        if param.is_flag:
            param.metavar = ""
        elif param.metavar is None:
            param.metavar = (param.name or "value").upper()


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


def not_negative(value: _Number) -> _Number:
    """An option's callback: a count or a duration that may not be below 0 (nor NaN or an
    infinity, which float options take)."""
    if not math.isfinite(value):
        raise typer.BadParameter(f"{value:g} is not a finite number; give 0 or more")
    if value < 0:
        raise typer.BadParameter(f"{value:g} is negative; give 0 or more")
    return value


def checked(check: Callable[..., float]) -> Callable[[float | None], float | None]:
    """An option's callback from one of the core's checks (called with ``name="it"``): its
    refusal is a usage error, before anything starts."""

    def callback(value: float | None) -> float | None:
        if value is None:
            return None
        try:
            return check(value, name="it")
        except InvalidInputError as exc:
            raise typer.BadParameter(str(exc)) from None

    return callback


def describe_os_error(exc: OSError) -> str:
    """An ``OSError`` as a sentence that names the path (when it has one) and what to check."""
    if isinstance(exc, DiskFullError):  # its message names the disk and what to do
        return str(exc)
    if not exc.filename:
        return f"{type(exc).__name__}: {exc}"
    also = f" (and {exc.filename2})" if exc.filename2 else ""
    reason = exc.strerror or str(exc)
    return f"cannot use {exc.filename}{also}: {reason}; check the path and its permissions"


def _help_hint(exc: Exception) -> str:
    ctx = getattr(exc, "ctx", None)
    path, names = getattr(ctx, "command_path", None), getattr(ctx, "help_option_names", None)
    return f" See '{path} {names[0]}'." if path and names else ""
