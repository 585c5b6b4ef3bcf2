"""What a session keeps on disk: its history (atomic JSON) and its episodic log (JSONL),
both private (0600, in 0700 directories it creates)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scratchpad.errors import ConfigError
from scratchpad.fsutil import (
    PRIVATE_FILE_MODE,
    append_private,
    atomic_write_text,
    private_dir,
)
from scratchpad.llm.messages import Message

Scrub = Callable[[str], str]
INPUT_CHARS = 500
RESULT_CHARS = 2000


class SessionFiles:
    """``<dir>/<session_id>.json`` (history) and ``<dir>/<session_id>.jsonl`` (episodes)."""

    def __init__(self, directory: Path, session_id: str, scrub: Scrub) -> None:
        self.history_path = directory / f"{session_id}.json"
        self.log_path = directory / f"{session_id}.jsonl"
        self.scrub = scrub

    def load_history(self) -> list[Message]:
        try:
            data = json.loads(self.history_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"cannot restore session history from {self.history_path}: {exc}; "
                "move the file away to start this session afresh"
            ) from exc
        try:
            return [Message.from_dict(item) for item in data.get("history", [])]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{self.history_path} is not a session history: {exc}") from exc

    def save_history(self, history: list[Message]) -> None:
        """The history as the file keeps it: every text scrubbed (what the user typed, the
        model's calls and answers, tool results), images as they are."""
        saved = [_scrubbed(m.to_dict(), self.scrub) for m in history]
        payload = {"saved_at": time.time(), "history": saved}
        private_dir(self.history_path.parent)
        text = json.dumps(payload, ensure_ascii=False)
        atomic_write_text(self.history_path, text, mode=PRIVATE_FILE_MODE)

    def log(self, kind: str, **fields: Any) -> None:
        """One episodic line; long inputs and results are cut, everything is scrubbed."""
        record = {"time": time.time(), "kind": kind}
        for key, value in fields.items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            limit = RESULT_CHARS if key == "result" else INPUT_CHARS
            text = self.scrub(text)  # before cutting: a secret must not survive half-cut
            record[key] = text[:limit] + ("…" if len(text) > limit else "")
        append_private(self.log_path, (json.dumps(record, ensure_ascii=False) + "\n").encode())


def _scrubbed(value: Any, scrub: Scrub) -> Any:
    """Strings anywhere in a message's dict scrubbed (keys too); an image block's data kept."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        if value.get("type") == "image":
            return value
        return {scrub(k): _scrubbed(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(item, scrub) for item in value]
    return value
