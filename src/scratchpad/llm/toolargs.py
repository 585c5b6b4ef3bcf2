"""Tool-call arguments as models send them: strict JSON, else a careful repair, else an error.

Models cut off mid-call (a max_tokens stop) or leave a trailing comma. The repair closes an
open string, drops a trailing comma or a dangling key, and balances brackets; anything it
cannot turn into a JSON object is reported, never guessed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from scratchpad.llm.messages import ToolCall

CLOSERS = {"{": "}", "[": "]"}
LITERALS = ("true", "false", "null")
NUMBER_TAIL = "-+.eE"


@dataclass(frozen=True, slots=True)
class ParsedArguments:
    input: dict[str, Any]
    parse_error: str | None = None
    repaired: bool = False


def parse_arguments(raw: str | dict[str, Any] | None) -> ParsedArguments:
    """The arguments of one tool call; ``{}`` with ``parse_error`` when hopeless."""
    if isinstance(raw, dict):
        return ParsedArguments(raw)
    if raw is None or not raw.strip():
        return ParsedArguments({})  # a tool without arguments
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        strict_error = f"{exc.msg} at character {exc.pos}"
    else:
        if isinstance(value, dict):
            return ParsedArguments(value)
        return ParsedArguments({}, f"arguments must be a JSON object, not {type(value).__name__}")
    repaired = repair_json(raw)
    if repaired is not None:
        try:
            value = json.loads(repaired)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return ParsedArguments(value, repaired=True)
    return ParsedArguments({}, f"arguments are not valid JSON ({strict_error})")


def tool_call(name: str, raw: str | dict[str, Any] | None, call_id: str) -> ToolCall:
    """A ToolCall from raw arguments as a stream or an API delivered them."""
    parsed = parse_arguments(raw)
    return ToolCall(name, parsed.input, call_id, parsed.parse_error, parsed.repaired)


def repair_json(raw: str) -> str | None:
    """A best-effort completion of truncated or sloppy JSON; None if it is not JSON-like."""
    text = raw.strip()
    if not text.startswith(("{", "[")):
        return None
    out: list[str] = []
    stack: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            out.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in CLOSERS:
            stack.append(CLOSERS[char])
        elif char in "}]":
            if not stack or stack.pop() != char:
                return None
            _drop_trailing_comma(out)
        out.append(char)
    if in_string:
        if escaped:
            out.pop()  # a lone backslash cannot end a string
        out = list(_drop_partial_unicode_escape("".join(out)))
        out.append('"')
    in_object = bool(stack) and stack[-1] == "}"
    text = "".join(out) if in_string else _complete_scalar("".join(out).rstrip())
    return _drop_dangling(text, in_object) + "".join(reversed(stack))


def _drop_partial_unicode_escape(text: str) -> str:
    """``"caf\\u00`` cut inside a ``\\uXXXX`` escape: drop the unfinished escape."""
    match = re.search(r"\\u[0-9a-fA-F]{0,3}$", text)
    if match is None:
        return text
    backslashes = len(text[: match.start()]) - len(text[: match.start()].rstrip("\\"))
    return text[: match.start()] if backslashes % 2 == 0 else text


def _complete_scalar(text: str) -> str:
    """Finish a cut-off literal (``tr`` → ``true``); drop a number's unfinished end (``1e-``)."""
    while (
        text
        and text[-1] in NUMBER_TAIL
        and len(text) > 1
        and (text[-2].isdigit() or text[-2] in NUMBER_TAIL or text[-2] in ":,[ \t\n")
    ):
        text = text[:-1]
    word = re.search(r"[a-z]+$", text)
    if word is not None:
        for literal in LITERALS:
            if literal.startswith(word.group(0)):
                return text[: word.start()] + literal
    return text


def _drop_trailing_comma(out: list[str]) -> None:
    index = len(out) - 1
    while index >= 0 and out[index].isspace():
        index -= 1
    if index >= 0 and out[index] == ",":
        del out[index]


def _drop_dangling(text: str, in_object: bool) -> str:
    """Remove what cannot be completed at the end: a comma, or a key without its value."""
    text = text.rstrip()
    if text.endswith(","):
        return text[:-1].rstrip()
    if not in_object:
        return text
    if text.endswith(":"):
        key_start = _string_start(text[:-1].rstrip())
        if key_start is not None:
            return _drop_dangling(text[:key_start], in_object)
    if text.endswith('"'):
        key_start = _string_start(text)
        if key_start is not None and text[:key_start].rstrip().endswith(("{", ",")):
            before = text[:key_start].rstrip()
            return before[:-1].rstrip() if before.endswith(",") else before  # a lone key
    return text


def _string_start(text: str) -> int | None:
    """Index of the opening quote of the string that ends ``text`` (which ends with ``"``)."""
    if not text.endswith('"'):
        return None
    index = len(text) - 2
    while index >= 0:
        if text[index] == '"':
            backslashes = 0
            probe = index - 1
            while probe >= 0 and text[probe] == "\\":
                backslashes += 1
                probe -= 1
            if backslashes % 2 == 0:
                return index
        index -= 1
    return None
