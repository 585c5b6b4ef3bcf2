"""The forms a secret takes in output, built once when it is registered.

A value is caught as itself and as careless code prints it: upper- and lower-cased,
JSON-escaped, ``repr``/``ascii()``/``bytes`` escaped, URL-encoded (``%xx`` in either case, also
every byte as ``%xx``), hex (either case), HTML/XML-escaped, shell-quoted, as ``list(value)``,
and base64 (standard and URL-safe, at each of the three alignments a value takes after other
bytes). A multi-line value is also caught line by line. Each form is an exact string: matching
stays case-sensitive, so the engine skips the many positions where no form can start.

A prefix of at least :data:`ANCHOR_CHARS` characters of a value (``key[:12]``, the 200
characters CPython's ``int()`` error quotes) is caught in every form that encodes character by
character, and a suffix as it is printed (in either case) and in base64: such a form carries the
encoding of the value's first (and last) :data:`ANCHOR_CHARS` characters as anchors, and the
matcher extends a found anchor as far as the text goes on agreeing with the form. Only values
that look random there get anchors: a URL, a PEM armour line or a piece of words would make a
prefix redact ordinary text.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote, quote_plus

MIN_SECRET_CHARS = 6  # shorter values are refused: they would redact ordinary words
ANCHOR_CHARS = 12  # a prefix or suffix this long (or longer) is caught as the value is
BASE64_ANCHOR = 12  # base64 characters (9 bytes) of a value's prefix or suffix
_WORDY = re.compile(r"[a-z]{7}|[A-Z]{7}|://")  # a run of one-case letters reads as words
_PERCENT = re.compile(r"%[0-9A-F]{2}")


@dataclass(frozen=True, slots=True)
class Form:
    """One form of a secret with the lengths of its prefix and suffix anchors (0: only the
    whole form is caught)."""

    text: str
    head: int = 0
    tail: int = 0


def _repr_inner(value: str) -> str:
    return repr(value)[1:-1]


def _shell_single(value: str) -> str:
    return value.replace("'", "'\"'\"'")  # shlex.quote inside its quotes


def _utf8(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass")


def _lower_escapes(text: str) -> str:
    """``%2F`` as ``%2f``: the hex digits of percent escapes in lower case."""
    return _PERCENT.sub(lambda match: match.group().lower(), text)


def _every_byte(value: str) -> str:
    return "".join(f"%{byte:02x}" for byte in _utf8(value))


# Encodings that turn a value into output character by character (a prefix of the value
# encodes to a prefix of the form), each applied to the value and its prefix (and, for the
# value itself and its cases, to its suffix: a suffix is printed as it is, ``key[-12:]``).
CASES: tuple[Callable[[str], str], ...] = (lambda value: value, str.upper, str.lower)
ESCAPED: tuple[Callable[[str], str], ...] = (
    lambda value: json.dumps(value)[1:-1],
    lambda value: json.dumps(value, ensure_ascii=False)[1:-1],
    _repr_inner,
    lambda value: ascii(value)[1:-1],
    lambda value: repr(_utf8(value))[2:-1],
    lambda value: quote(value, safe=""),
    lambda value: _lower_escapes(quote(value, safe="")),
    quote,
    lambda value: _lower_escapes(quote(value)),
    quote_plus,
    lambda value: _lower_escapes(quote_plus(value)),
    _every_byte,
    lambda value: _every_byte(value).upper(),
    lambda value: _utf8(value).hex(),
    lambda value: _utf8(value).hex().upper(),
    html.escape,
    lambda value: html.escape(value, quote=False),  # also xml.sax.saxutils.escape
    lambda value: html.escape(value).replace("&#x27;", "&#39;"),  # Django
    lambda value: html.escape(value).replace("&#x27;", "&#39;").replace("&quot;", "&#34;"),
    _shell_single,
    lambda value: value.replace("'", "'\\''"),
)

# Encodings caught only whole: a piece of them could be a piece of ordinary text.
WHOLE: tuple[Callable[[str], str], ...] = (
    lambda value: repr(list(value))[1:-1],
    lambda value: json.dumps(list(value))[1:-1],
)


def secret_lines(value: str) -> list[str]:
    """A value and, when it spans lines, each of its lines long enough to be caught alone."""
    lines = [line.strip() for line in value.splitlines()]
    return [value] + [line for line in lines if len(line) >= MIN_SECRET_CHARS and line != value]


def forms_of(value: str) -> list[Form]:
    """Every form of ``value`` (and of its lines), at least MIN_SECRET_CHARS long."""
    found: dict[str, Form] = {}
    for line in secret_lines(value):
        for form in _line_forms(line):
            if len(form.text) >= MIN_SECRET_CHARS and form.text not in found:
                found[form.text] = form
    return list(found.values())


def _line_forms(line: str) -> list[Form]:
    head = _anchored(line[:ANCHOR_CHARS], line)
    tail = _anchored(line[-ANCHOR_CHARS:], line)
    forms = []
    for encode in CASES + ESCAPED:
        text = encode(line)
        forms.append(
            Form(
                text,
                head=_anchor_length(encode(line[:ANCHOR_CHARS]), text, head),
                tail=_anchor_length(encode(line[-ANCHOR_CHARS:]), text, tail and encode in CASES),
            )
        )
    forms += [Form(encode(line)) for encode in WHOLE]
    raw = _utf8(line)
    for to_base64 in (base64.b64encode, base64.urlsafe_b64encode):
        for core in _base64_cores(raw, to_base64):
            forms.append(
                Form(
                    core,
                    head=_anchor_length(core[:BASE64_ANCHOR], core, head),
                    tail=_anchor_length(core[-BASE64_ANCHOR:], core, tail),
                )
            )
    return forms


def _anchor_length(anchor: str, text: str, wanted: bool) -> int:
    """The anchor's length, when an anchor is wanted and shorter than the form."""
    return len(anchor) if wanted and len(anchor) < len(text) else 0


def _anchored(piece: str, line: str) -> bool:
    """Whether a prefix or suffix ``piece`` of a value may stand for it: the value is longer
    than the piece, is no URL and no PEM armour line, and the piece reads as random (no run
    of seven one-case letters, at least two kinds of characters)."""
    if len(line) <= ANCHOR_CHARS or "://" in line or line.startswith("-----"):
        return False
    kinds = sum(
        any(test(char) for char in piece)
        for test in (str.islower, str.isupper, str.isdigit, lambda c: not c.isalnum())
    )
    return kinds >= 2 and _WORDY.search(piece) is None


def _base64_cores(raw: bytes, encode: Callable[[bytes], bytes]) -> set[str]:
    """The base64 characters that depend on ``raw`` alone, for each of its three alignments
    (a value after 0, 1 or 2 other bytes encodes differently)."""
    cores = set()
    for shift in range(3):
        text = encode(b"\0" * shift + raw).decode("ascii")
        first = -(-8 * shift // 6)  # the first character made only of the value's bits
        last = 8 * (shift + len(raw)) // 6  # characters past it mix in what follows
        cores.add(text[first:last])
    return cores
