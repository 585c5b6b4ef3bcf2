"""Pad names and the directories they live in: validated before anything touches the disk.

A name is any non-empty string of up to 128 characters without control characters (the model
picks names: ``'my pad'``, ``'données'``, ``'data/analysis'``). Its directory under ``pads/`` is
the name itself when the name is plain (``SAFE_NAME``), else a slug plus ``+`` and a short hash
of the name: ``+`` never occurs in a plain name, so two names never share a directory, and no
name can reach outside ``pads/`` by construction. The real name is kept in ``pad.json`` beside
the venv, so listing the directory gives the names back. A pad's own working directory (see
workdir.py) takes the same name under ``workspaces/``.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import Path
from urllib.parse import quote

from scratchpad.errors import InvalidPadNameError
from scratchpad.text import find_control

MAX_NAME_CHARS = 128
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
HASHED_DIR = re.compile(r"[A-Za-z0-9_.-]{0,40}\+[0-9a-f]{12}")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9_.-]+")


def validate_pad_name(name: object) -> str:
    """Return ``name`` if it can name a pad, else raise InvalidPadNameError saying why."""
    if not isinstance(name, str) or not name:
        raise InvalidPadNameError(
            f"invalid pad name {name!r}: give a non-empty name such as 'main' or 'data-2'"
        )
    if len(name) > MAX_NAME_CHARS:
        raise InvalidPadNameError(
            f"invalid pad name {name[:40]!r}…: it has {len(name)} characters, at most "
            f"{MAX_NAME_CHARS} are allowed"
        )
    bad = find_control(name)
    if bad is not None:
        raise InvalidPadNameError(
            f"invalid pad name {name!r}: it contains {bad.group()!r} at position {bad.start()}; "
            "control characters (and unpaired surrogates) are not allowed in names"
        )
    return name


def dir_name(name: str) -> str:
    """The directory of pad ``name`` under ``pads/`` (one path component, never '.' or '..')."""
    name = validate_pad_name(name)
    if SAFE_NAME.fullmatch(name):
        return name
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = _UNSAFE_RUN.sub("-", ascii_name).strip("-.")[:40]
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:12]
    return f"{slug}+{digest}"


def dir_in(parent: Path, name: str) -> Path:
    """Pad ``name``'s directory in ``parent`` (``pads/``, ``workspaces/``): never outside it,
    by construction, and checked."""
    path = parent / dir_name(name)
    if path.parent != parent or path.name in ("", ".", ".."):
        raise InvalidPadNameError(f"pad name {name!r} does not map into {parent}")
    return path


def is_pad_dir_name(entry: str) -> bool:
    """Whether a directory name under ``pads/`` is one :func:`dir_name` can produce."""
    return bool(SAFE_NAME.fullmatch(entry) or HASHED_DIR.fullmatch(entry))


def url_component(name: str) -> str:
    """``name`` as one path segment of a URL (``/`` included, percent-encoded)."""
    return quote(name, safe="")
