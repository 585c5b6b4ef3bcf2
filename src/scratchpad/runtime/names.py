"""Pad names: validated before anything touches the disk."""

from __future__ import annotations

import re

from scratchpad.errors import InvalidPadNameError

PAD_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
_PAD_NAME = re.compile(PAD_NAME_PATTERN)


def validate_pad_name(name: object) -> str:
    """Return ``name`` if it is a valid pad name, else raise InvalidPadNameError."""
    if isinstance(name, str) and _PAD_NAME.fullmatch(name):
        return name
    raise InvalidPadNameError(
        f"invalid pad name {name!r}: use 1-64 characters from letters, digits, '_', '.', '-', "
        "starting with a letter or digit (e.g. 'main', 'data-2')"
    )
