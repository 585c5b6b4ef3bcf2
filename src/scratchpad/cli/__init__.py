"""The command line: ``scratchpad exec|view|dump|ls|rm|install|reset|demo|obs|chat``."""

from __future__ import annotations


def main() -> None:
    from scratchpad.isolation import drop_start_directory

    drop_start_directory()  # before anything is imported lazily (see isolation.py)
    from scratchpad.cli.app import app

    app(prog_name="scratchpad")  # also under `python -m scratchpad.cli`
