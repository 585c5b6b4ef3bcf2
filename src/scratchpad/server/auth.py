"""The server's API key: from SCRATCHPAD_API_KEY, or generated once and kept 0600 on disk.

Processes that start at once on a fresh home agree on one key: the file is created
exclusively (complete temp file, then ``link``), and every loser reads the winner's key.
"""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.errors import ConfigError
from scratchpad.fsutil import create_exclusive, private_dir
from scratchpad.scrub import register


def key_path(settings: Settings) -> Path:
    return settings.api_key_path


def resolve_api_key(settings: Settings) -> str:
    """The configured key, else the stored one, else a new one stored ``0600``; the scrubber
    knows it from then on."""
    key = _resolve(settings)
    register([(key, "SCRATCHPAD_API_KEY")])
    return key


def _resolve(settings: Settings) -> str:
    if settings.api_key:
        return settings.api_key
    path = key_path(settings)
    stored = _read_key(path)
    if stored is None:
        key = secrets.token_urlsafe(32)
        private_dir(settings.home)
        if create_exclusive(path, f"{key}\n".encode(), mode=0o600):
            return key
        stored = _read_key(path)  # another process created it first: its key is the key
    if not stored:
        raise ConfigError(
            f"{path} is empty: delete it (a new key is generated at the next start), "
            "or set SCRATCHPAD_API_KEY"
        )
    return stored


def _read_key(path: Path) -> str | None:
    """The stored key (stripped), or None when there is no key file."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None


def authorized(header: str | None, key: str) -> bool:
    """Whether ``Authorization: Bearer <key>`` matches, compared in constant time."""
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer ") :].encode(), key.encode())
