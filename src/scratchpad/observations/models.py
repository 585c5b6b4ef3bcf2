"""What the observation store hands out: entry descriptions, whole entries, read slices."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

ContentKind = Literal["text", "binary"]
ReadMode = Literal["full", "head", "tail", "range", "lines", "grep"]
READ_MODES: tuple[str, ...] = ("full", "head", "tail", "range", "lines", "grep")


@dataclass(frozen=True, slots=True)
class ObservationInfo:
    """An entry without its content (what listings show)."""

    id: str
    turn_id: str
    step_num: int | None
    tool: str | None
    kind: ContentKind
    size_bytes: int
    char_count: int
    line_count: int
    summary: str
    metadata: dict[str, Any]
    created_at: float
    expires_at: float

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> ObservationInfo:
        """From ``SELECT`` of ``INFO_COLUMNS`` (in that order)."""
        (
            id_,
            turn_id,
            step_num,
            tool,
            kind,
            size,
            chars,
            lines,
            summary,
            metadata,
            created_at,
            expires_at,
        ) = row
        return cls(
            id_,
            turn_id,
            step_num,
            tool,
            kind,
            size,
            chars,
            lines,
            summary,
            json.loads(metadata),
            created_at,
            expires_at,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


INFO_COLUMNS = (
    "id, turn_id, step_num, tool, content_kind, size_bytes, char_count, line_count, summary, "
    "metadata, created_at, expires_at"
)


@dataclass(frozen=True, slots=True)
class ObservationEntry:
    """A whole entry: its description and its full content (str for text, bytes for binary)."""

    info: ObservationInfo
    content: str | bytes


@dataclass(frozen=True, slots=True)
class ReadResult:
    """One slice of an entry, saying where it is so the reader can page.

    ``start``/``end`` are 0-based and end-exclusive for chars and bytes, 1-based and inclusive
    for lines. Binary slices are base64 text. For grep, ``matches`` counts every matching line
    and ``shown`` the ones included.
    """

    observation_id: str
    mode: ReadMode
    unit: Literal["chars", "bytes", "lines"]
    start: int
    end: int
    total: int
    content: str
    encoding: Literal["text", "base64"] = "text"
    matches: int | None = None
    shown: int | None = None
    note: str = ""

    def header(self) -> str:
        """E.g. ``chars 0–2000 of 89042 (87042 more after)``."""
        if self.mode == "grep":
            text = f"grep: {self.matches} matching line{'' if self.matches == 1 else 's'}"
            if self.shown is not None and self.matches is not None and self.shown < self.matches:
                text += f", showing the first {self.shown}"
            text += f" (of {self.total} lines)"
        else:
            text = f"{self.unit} {self.start}–{self.end} of {self.total}"
            after = self.total - self.end
            if after > 0:
                text += f" ({after} more after)"
        if self.encoding == "base64":
            text += "; base64"
        return text + (f"; {self.note}" if self.note else "")

    def render(self) -> str:
        """Header and content, as a tool shows it to a model."""
        return f"[{self.observation_id}: {self.header()}]\n{self.content}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["header"] = self.header()
        return data
