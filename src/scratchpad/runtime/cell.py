"""The cell model: one execution of code in a pad, and the events streamed while it runs."""

from __future__ import annotations

import codecs
import collections
import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Generic, Literal, TypeVar

CellStatus = Literal["ok", "error", "timeout", "cancelled", "killed"]
CELL_STATUSES: tuple[str, ...] = ("ok", "error", "timeout", "cancelled", "killed")
StreamName = Literal["stdout", "stderr"]
T = TypeVar("T")
CELL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a cell id (also a valid nbformat cell id)


def new_cell_id() -> str:
    return secrets.token_hex(6)


@dataclass(slots=True)
class Cell:
    """One executed cell. Errors in user code are data: ``status`` + traceback in ``error``.

    ``result`` is the text of the last expression (a notebook's ``Out[n]``) and
    ``result_data`` its rich forms (``{"text/html": ...}`` of a DataFrame; text/plain is
    ``result``); ``outputs`` holds rich mime bundles (``{"image/png": <base64>, "text/plain":
    ...}``) from display() and matplotlib, and ``outputs_at`` where each stands among the
    output: ``[stdout, stderr]``, the characters of each that came before it (empty in a
    record older than that, or when the outputs were left out); ``logs`` holds progress
    messages, ``logging`` records (INFO and up) and notes from the runtime. ``number`` is the
    cell's place in its pad, 1-based, fixed when it is queued and shown the same everywhere
    (view, dump, a notebook's execution_count, tracebacks); 0 for a cell that stands for
    others (a summary, a note of folded history) or never reached a pad.
    """

    code: str
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    description: str = ""
    estimated_time: str = ""
    logs: str = ""
    id: str = field(default_factory=new_cell_id)
    status: CellStatus = "ok"
    result: str | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    duration_s: float = 0.0
    number: int = 0
    result_data: dict[str, Any] = field(default_factory=dict)
    outputs_at: list[list[int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The cell as JSON-ready data (a hand-written copy: ``asdict`` deep-copies, slowly)."""
        data = {name: getattr(self, name) for name in CELL_FIELDS}
        data["outputs"] = [dict(bundle) for bundle in self.outputs]
        data["result_data"] = dict(self.result_data)
        data["outputs_at"] = [list(at) for at in self.outputs_at]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cell:
        """Rebuild a cell from JSON; unknown keys are ignored, missing ones take defaults."""
        cell = cls(**{k: v for k, v in data.items() if k in CELL_FIELDS})
        if cell.status not in CELL_STATUSES:
            raise ValueError(f"unknown cell status {cell.status!r}")
        if type(cell.number) is not int or cell.number < 0:
            raise ValueError(f"a cell's number is a whole number >= 0, not {cell.number!r}")
        if not isinstance(cell.result_data, dict):
            raise ValueError("a cell's result_data is a mime bundle (an object)")
        if not _places_of(cell.outputs_at, len(cell.outputs)):
            cell.outputs_at = []  # only the outputs' order: without it they show grouped
        return cell

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def rough_size(self) -> int:
        """About how many characters the cell holds (to pick a cheap or a careful path)."""
        texts = (self.code, self.stdout, self.stderr, self.logs, self.error, self.result)
        rich = _outputs_chars(self.outputs) + bundle_size(self.result_data)
        return sum(len(text) for text in texts if text) + rich


def _places_of(places: Any, count: int) -> bool:
    """Whether ``places`` are an ``outputs_at`` for ``count`` outputs."""
    return (
        isinstance(places, list)
        and len(places) == count
        and all(
            isinstance(at, list) and len(at) == 2 and all(type(n) is int and n >= 0 for n in at)
            for at in places
        )
    )


CELL_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Cell))


def in_order(cell: Cell) -> list[tuple[str, Any]]:
    """What the cell made, in order: ``("stdout" | "stderr", text)`` pieces cut where
    ``outputs_at`` places its displays, and ``("display", bundle)``; without places (an older
    record), stdout, stderr, then the displays."""
    texts = (cell.stdout, cell.stderr)
    ends = [len(text) for text in texts]
    known = len(cell.outputs_at) == len(cell.outputs)
    places = cell.outputs_at if known else [ends] * len(cell.outputs)
    made: list[tuple[str, Any]] = []
    done = [0, 0]
    for bundle, at in [*zip(cell.outputs, places, strict=True), (None, ends)]:
        for column, stream in enumerate(("stdout", "stderr")):
            end = min(at[column], ends[column])
            if end > done[column]:
                made.append((stream, texts[column][done[column] : end]))
                done[column] = end
        if bundle is not None:
            made.append(("display", bundle))
    return made


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """``progress(msg)`` was called inside the cell."""

    message: str


@dataclass(frozen=True, slots=True)
class OutputEvent:
    """A piece of the cell's stdout or stderr, as it arrived."""

    stream: StreamName
    text: str


@dataclass(frozen=True, slots=True)
class DisplayEvent:
    """A rich output (mime bundle) was displayed."""

    data: dict[str, Any]


StreamItem = ProgressEvent | OutputEvent | DisplayEvent | Cell


class CappedOutput:
    """Bytes of one stream of one cell, keeping at most ``cap`` bytes: head and tail.

    The middle of an oversized stream is dropped and replaced by a note saying how much.
    Streamed text (for events) is decoded incrementally so a UTF-8 character split across
    two reads is not mangled; invalid bytes become U+FFFD.
    """

    def __init__(self, cap: int) -> None:
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._decoder: codecs.IncrementalDecoder | None = None  # made on first output

    def append(self, data: bytes) -> str | None:
        """Store ``data``; returns the text to stream, or None once past the head."""
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            taken = data[:room]
            self.head += taken
            data = data[room:]
            if self._decoder is None:
                self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
            streamed: str | None = self._decoder.decode(taken)
        else:
            streamed = None
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]
        return streamed

    def end_stream(self) -> str:
        """What the streamed text still lacks at the end (an unfinished UTF-8 sequence as
        U+FFFD, as :meth:`text` has it)."""
        return "" if self._decoder is None else self._decoder.decode(b"", final=True)

    @property
    def dropped(self) -> int:
        return max(0, self.total - len(self.head) - min(len(self.tail), self.tail_cap))

    def text(self, trim: Callable[[str, str], tuple[str, str]] | None = None) -> str:
        """The kept text; where the middle was dropped, ``trim`` (a scrubber's ``trim_cut``)
        gives back head and tail without what could be part of a secret the cut went
        through, and the note counts that as dropped too."""
        return "".join(self.parts(trim)[:3])

    def parts(
        self, trim: Callable[[str, str], tuple[str, str]] | None = None
    ) -> tuple[str, str, str, bytes]:
        """The kept text as head, note of the dropped middle ("" when none was) and tail (see
        :meth:`text`), and the bytes of the stream the tail ends with (to place marks)."""
        if not self.tail:
            return self.head.decode("utf-8", "replace"), "", "", b""
        tail_bytes = bytes(self.tail[-self.tail_cap :])
        dropped = self.dropped
        if not dropped:  # decoded as one: a character may straddle head and tail
            whole = (bytes(self.head) + tail_bytes).decode("utf-8", "replace")
            cut = len(codecs.getincrementaldecoder("utf-8")("replace").decode(bytes(self.head)))
            return whole[:cut], "", whole[cut:], tail_bytes
        head = self.head.decode("utf-8", "replace")
        tail = tail_bytes.decode("utf-8", "replace")
        if trim is not None:
            kept_head, kept_tail = trim(head, tail)
            dropped += len(head[len(kept_head) :].encode("utf-8", "replace"))
            dropped += len(tail[: len(tail) - len(kept_tail)].encode("utf-8", "replace"))
            head, tail = kept_head, kept_tail
        note = f"\n[... {dropped} bytes of output dropped (kept the first and last part) ...]\n"
        return head, note, tail, tail_bytes


def chars_after(data: bytes, offsets: list[int]) -> list[int]:
    """For each byte offset into ``data``, how many characters its decoded rest holds (one
    pass over ``data``, however many offsets)."""
    counts: dict[int, int] = {}
    after = 0
    end = len(data)
    for offset in sorted({min(max(0, o), len(data)) for o in offsets}, reverse=True):
        after += len(data[offset:end].decode("utf-8", "replace"))
        counts[offset] = after
        end = offset
    return [counts[min(max(0, o), len(data))] for o in offsets]


class CappedItems(Generic[T]):
    """A cell's list of items (log lines, displays) kept to about ``cap`` in total size: the
    first half as they came, then a sliding tail; what fell between is counted."""

    def __init__(self, cap: int, size: Callable[[T], int]) -> None:
        self.half = cap // 2
        self.size = size
        self.head: list[T] = []
        self.tail: collections.deque[tuple[T, int]] = collections.deque()
        self.head_size = 0
        self.tail_size = 0
        self.dropped = 0
        self.dropped_size = 0

    def append(self, item: T) -> bool:
        """Keep ``item``; True while it is in the head (a listener should see it)."""
        size = self.size(item)
        if not self.tail and self.head_size + size <= self.half:
            self.head.append(item)
            self.head_size += size
            return True
        self.tail.append((item, size))
        self.tail_size += size
        while self.tail_size > self.half and len(self.tail) > 1:
            _, gone = self.tail.popleft()
            self.tail_size -= gone
            self.dropped += 1
            self.dropped_size += gone
        return False

    def items(self) -> list[T]:
        return [*self.head, *(item for item, _ in self.tail)]


FITTED_FIELDS = (
    "stdout",
    "stderr",
    "logs",
    "error",
    "result",
    "code",
    "description",
    "estimated_time",
)


def encoded_size(value: Any) -> int:
    """Bytes of ``value`` as UTF-8 JSON (a control character costs 6)."""
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "replace"))


def rough_chars(cell: dict[str, Any]) -> int:
    """Characters of a cell's text fields and outputs: a cheap lower bound of its encoding."""
    size = sum(len(value) for value in cell.values() if isinstance(value, str))
    rich = _outputs_chars(cell.get("outputs") or []) + bundle_size(cell.get("result_data") or {})
    return size + rich


def bundle_size(bundle: dict[str, Any]) -> int:
    """About how many characters a mime bundle takes (text as it is, other data as JSON)."""
    return sum(
        len(value) if isinstance(value, str) else len(json.dumps(value, default=str))
        for value in bundle.values()
    )


def _outputs_chars(outputs: list[dict[str, Any]]) -> int:
    return sum(bundle_size(bundle) for bundle in outputs)


def fit_cell(cell: dict[str, Any], limit: int, why: str | Callable[[str], str]) -> dict[str, Any]:
    """A copy of the cell (as JSON data) whose encoding takes at most about ``limit`` bytes:
    outputs left out and long fields cut to their head and tail, sharing the room. Each field
    is cut once, from its whole text, so its note counts every character that went (an earlier
    cut's too); ``why`` (or ``why(field)``) ends the note, e.g. where the whole text is."""
    if rough_chars(cell) <= limit and encoded_size(cell) <= limit:
        return cell
    note = why if callable(why) else lambda field: why
    original, cell = cell, dict(cell)
    outputs = cell.get("outputs") or []
    if _outputs_chars(outputs) > limit // 4 or encoded_size(outputs) > limit // 4:
        kinds = ", ".join(sorted({kind for bundle in outputs for kind in bundle}))
        left_out = f"[{len(outputs)} output(s) ({kinds}) left out {note('outputs')}]"
        cell["outputs"] = [{"text/plain": left_out}]
        cell["outputs_at"] = []
    rich = cell.get("result_data") or {}
    if bundle_size(rich) > limit // 4 or encoded_size(rich) > limit // 4:
        cell["result_data"] = {}  # the result's text stays
    whole = {f: cell[f] for f in FITTED_FIELDS if isinstance(cell.get(f), str)}
    keep = _shares({f: len(text) for f, text in whole.items()}, limit)
    for name in whole:
        cell[name] = _cut(whole[name], keep[name], note(name))
    for _ in range(100):
        size = encoded_size(cell)
        if size <= limit or not whole:
            break
        longest = max(whole, key=lambda f: encoded_size(cell[f]))
        text = cell[longest]
        ratio = len(text) / max(1, encoded_size(text))
        fewer = keep[longest] - int((size - limit) * ratio) - 100
        keep[longest] = max(fewer, keep[longest] // 2) if fewer > 0 else 0
        cut = _cut(whole[longest], keep[longest], note(longest))
        if encoded_size(cut) >= encoded_size(text):
            cut = ""  # even the note does not fit
        if not cut:
            del whole[longest]  # nothing left of it to cut
        cell[longest] = cut
    if cell.get("outputs_at"):
        cell["outputs_at"] = _cut_places(cell, original, keep)
    return cell


def _cut_places(
    cell: dict[str, Any], original: dict[str, Any], keep: dict[str, int]
) -> list[list[int]]:
    """The cell's ``outputs_at`` moved to where its cut stdout and stderr (see :func:`_cut`)
    now have each place (one in a cut middle: just after the note)."""
    moved = []
    for at in cell["outputs_at"]:
        places = []
        for name, place in zip(("stdout", "stderr"), at, strict=False):
            whole, text = original.get(name) or "", cell.get(name) or ""
            if text != whole:
                half = keep[name] // 2 if text else 0
                note = len(text) - 2 * half
                if place > half:
                    place = half + note + max(0, place - (len(whole) - half))
            places.append(min(place, len(text)))
        moved.append(places)
    return moved


def _shares(sizes: dict[str, int], limit: int) -> dict[str, int]:
    """How many characters each field keeps so that they fill about ``limit`` together: an
    even share each, what a short field leaves over going to the longer ones."""
    keep = dict(sizes)
    room = limit
    for count, name in enumerate(sorted(sizes, key=sizes.__getitem__)):
        share = room // (len(sizes) - count)
        keep[name] = min(sizes[name], share)
        room -= keep[name]
    return keep


EARLIER_CUT = re.compile(r"\n\[\.\.\. (\d+) characters (?:omitted|cut)[^\n\]]* \.\.\.\]\n")


def _cut(text: str, keep: int, why: str) -> str:
    """``text`` as its head and tail, ``keep`` characters in all, around a note counting
    what went: the characters of the middle, and those that an earlier cut's note in it
    (the kernel's, a history's) stood for."""
    if len(text) <= keep:
        return text
    half = keep // 2
    start, end = half, len(text) - half
    gone = end - start
    for earlier in EARLIER_CUT.finditer(text):
        if earlier.end() > start and earlier.start() < end:  # goes with the middle
            start, end = min(start, earlier.start()), max(end, earlier.end())
            gone = end - start
    for earlier in EARLIER_CUT.finditer(text, start, end):
        gone += int(earlier.group(1)) - len(earlier.group())
    note = f"\n[... {gone} characters cut {why} ...]\n"
    return text[:start] + note + text[end:]
