"""The server's API key: from SCRATCHPAD_API_KEY, or generated once and kept 0600 on disk."""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path

from scratchpad.config import Settings
from scratchpad.fsutil import atomic_write_text

KEY_FILE = "api_key"


def key_path(settings: Settings) -> Path:
    return settings.home / KEY_FILE


def resolve_api_key(settings: Settings) -> str:
    """The configured key, else the stored one, else a new one stored ``0600``."""
    if settings.api_key:
        return settings.api_key
    path = key_path(settings)
    try:
        stored = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        stored = ""
    if stored:
        return stored
    key = secrets.token_urlsafe(32)
    atomic_write_text(path, key + "\n", mode=0o600)
    return key


def authorized(header: str | None, key: str) -> bool:
    """Whether ``Authorization: Bearer <key>`` matches, compared in constant time."""
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer ") :].encode(), key.encode())
