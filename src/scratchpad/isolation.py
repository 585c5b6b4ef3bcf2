"""Processes of ours import nothing from the directory they start in.

``python -m`` and ``python -c`` put their working directory first on ``sys.path`` for the
whole life of the process, and that directory may be a pad's (a bound workspace, a project a
person serves from): a module planted there under any name the process imports later (lazily,
like ``nbformat`` at a notebook export) would run with the server's rights. So:

- a Python process we start runs ``python -P -m <module>`` by the interpreter's absolute path
  (``-P``: no working directory on ``sys.path``), from a directory no pad writes
  (:func:`python_command`, :func:`cli_command`);
- a process someone started otherwise (``python -m scratchpad.cli serve`` typed in a project)
  drops its start directory from ``sys.path`` before it imports anything else of ours
  (:func:`drop_start_directory`, at the CLI's entry point).
"""

from __future__ import annotations

import os
import sys

ISOLATED_FLAGS = ("-P",)  # not -I: that would also drop PYTHONPATH and a --user install


def python_command(module: str, *args: str) -> list[str]:
    """``module`` run by this interpreter, by absolute path, with an isolated ``sys.path``."""
    return [sys.executable, *ISOLATED_FLAGS, "-m", module, *args]


def cli_command(*args: str) -> list[str]:
    """The command line ``scratchpad ARGS...`` as a child process of ours runs it."""
    return python_command("scratchpad.cli", *args)


def drop_start_directory() -> None:
    """Remove the working directory that ``python -m`` / ``-c`` put first on ``sys.path``
    (nothing to do under ``-P`` or ``PYTHONSAFEPATH``). What is already imported stays; our own
    later imports resolve through the ``scratchpad`` package, never through that entry."""
    if sys.flags.safe_path or not sys.path:
        return
    first = sys.path[0]
    if first == "" or os.path.realpath(first) == os.path.realpath(os.getcwd()):
        del sys.path[0]
