"""``python -m scratchpad``: the command line."""

from scratchpad.cli import main

main()
