"""The forms careless code gives a secret, each caught; prefixes and suffixes of 12+ characters;
line-wrapped base64; the two sides of a cut; and no false positives on ordinary text."""

from __future__ import annotations

import base64
import html
import json
import re
import secrets
import shlex
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote
from xml.sax.saxutils import escape as xml_escape

import pytest

from scratchpad.runtime.cell import CappedOutput
from scratchpad.scrub import Scrubber
from tests.scrub.corpus import CONTROL_LINES

ASCII = "tok_9f8e7d6c5b4a3210fedcbaQX"
UNICODE = "Grüße-Straße-ключ-9Xq"
SPECIAL = "Ab&<c>\"d'e-Fg7h!Zq"
LABEL = "[DS_X__SECRET]"


def knowing(*values: str) -> Scrubber:
    scrub = Scrubber()
    for value in values:
        scrub.add(value, "DS_X__SECRET")
    return scrub


FORMS: dict[str, Callable[[str], str]] = {
    "upper": str.upper,
    "lower": str.lower,
    "html.escape": html.escape,
    "html.escape without quotes": lambda v: html.escape(v, quote=False),
    "xml escape": xml_escape,
    "html &#39;": lambda v: html.escape(v).replace("&#x27;", "&#39;"),
    "html &#39; &#34;": lambda v: (
        html.escape(v).replace("&#x27;", "&#39;").replace("&quot;", "&#34;")
    ),
    "shlex.quote": shlex.quote,
    "repr": repr,
    "ascii": ascii,
    "bytes": lambda v: str(v.encode()),
    "list": lambda v: str(list(v)),
    "json list": lambda v: json.dumps(list(v)),
    "json": json.dumps,
    "lowercase %xx": lambda v: re.sub(
        "%[0-9A-F]{2}", lambda m: m.group().lower(), quote(v, safe="")
    ),
    "every byte %xx": lambda v: "".join(f"%{b:02x}" for b in v.encode()),
    "hex": lambda v: v.encode().hex(),
    "base64": lambda v: base64.b64encode(v.encode()).decode(),
}


@pytest.mark.parametrize("value", [ASCII, UNICODE, SPECIAL])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_careless_code_prints_is_caught(form: str, value: str) -> None:
    printed = FORMS[form](value)
    out = knowing(value).scrub(f"before {printed} after")
    assert LABEL in out
    core = printed.strip("'\"[]b")  # what surrounds the value in the printed form stays
    assert core not in out, out


def random_reading_token() -> str:
    """A token whose first and last twelve characters read as random: a piece with a run of
    seven one-case letters reads as words, and no prefix or suffix is anchored on it (see
    test_only_values_that_read_as_random_give_their_prefix_away); about 1 token in 75."""
    while True:
        value = secrets.token_urlsafe(48)
        if not any(re.search("[a-z]{7}|[A-Z]{7}", end) for end in (value[:12], value[-12:])):
            return value


def test_prefixes_and_suffixes_of_twelve_characters_or_more_are_caught() -> None:
    value = random_reading_token()
    scrub = knowing(value)
    for size in range(12, len(value) + 1):
        assert scrub.scrub(f"key {value[:size]}.") == f"key {LABEL}.", size
        assert scrub.scrub(f"key {value[-size:]}.") == f"key {LABEL}.", size
    assert value[:11] in scrub.scrub(f"key {value[:11]}.")  # shorter pieces are no rule
    error = f"invalid literal for int() with base 10: {repr(value * 5)[:200]}"
    assert value[:40] not in scrub.scrub(error)


def test_only_values_that_read_as_random_give_their_prefix_away() -> None:
    url = "https://api.example.com/v1/query?token=Zq9xK2mW7pLr4Tn8"
    pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE\n-----END"
    words = "correcthorsebatterystaple"
    scrub = knowing(url, pem, words)
    for text in (
        "https://api.example.com/v2/other",
        "-----BEGIN OPENSSH PUBLIC",
        "correcthorsebattery",
    ):
        assert scrub.scrub(text) == text
    assert scrub.scrub(url) == LABEL


@pytest.mark.parametrize("separator", ["\n", "\r\n", "\\n"])
def test_line_wrapped_base64_is_caught_across_its_line_breaks(separator: str) -> None:
    value = secrets.token_urlsafe(150)
    scrub = knowing(value)
    for lead in (b"", b"u", b"us", b"user:"):
        wrapped = base64.encodebytes(lead + value.encode()).decode().replace("\n", separator)
        out = scrub.scrub(wrapped)
        assert LABEL in out
        lines = [line for line in wrapped.split(separator) if len(line) >= 8]
        assert not [line for line in lines[1:-1] if line in out], out  # every line of its bits
    short = knowing("Zq9xK2mW7pLr4Tn8")  # a wrap between two pieces of a value's base64
    encoded = base64.b64encode(b"Zq9xK2mW7pLr4Tn8").decode()
    out = short.scrub(encoded[:14] + separator + encoded[14:])
    assert LABEL in out and encoded[:14] not in out and encoded[14:20] not in out


def test_a_secret_cut_by_a_cap_leaves_nothing_on_either_side() -> None:
    value = "Zq9xK2mW7pLr4Tn8"
    scrub = knowing(value)
    for at in range(1, len(value)):
        head, tail = scrub.trim_cut("output line\n" + value[:at], value[at:] + "\nmore")
        assert head == "output line\n" and tail == "\nmore", at
    assert scrub.trim_cut("an ordinary line\n", "\nanother one") == (
        "an ordinary line\n",
        "\nanother one",
    )


def test_a_capped_stream_drops_what_the_cut_went_through() -> None:
    value = "Zq9xK2mW7pLr4Tn8"
    scrub = knowing(value)
    buffer = CappedOutput(64)
    buffer.append(b"." * 28 + value.encode() + b"," * 100 + value.encode() + b"." * 28)
    text = buffer.text(trim=scrub.trim_cut)
    note = "\n[... 132 bytes of output dropped (kept the first and last part) ...]\n"
    assert text == "." * 28 + note + "." * 28  # the pieces of the value counted as dropped
    stream = scrub.stream()
    assert stream.feed("." * 28 + value[:4]) == "." * 28
    assert stream.flush(cut=True) == ""


def test_ordinary_text_passes_with_many_secrets_known() -> None:
    """No false positives: lines of ordinary output and Python source, with a hundred random
    secrets, structured values and a letters-only token registered."""
    scrub = Scrubber()
    values = [secrets.token_urlsafe(24) for _ in range(100)] + [
        secrets.token_hex(16) for _ in range(20)
    ]
    values += ["postgres://app:Hunter2-pw@db:5432/app", "QxZvTkWmRpLnBfHjYcDsGtKa", "Db-pa55!word"]
    scrub.add_many({value: f"DS_{i}" for i, value in enumerate(values)})
    ordinary = (
        "\n".join(CONTROL_LINES)
        + "\n"
        + "".join(path.read_text() for path in sorted(Path(json.__file__).parent.glob("*.py")))
    )
    ordinary += Path(re.__file__).read_text() + Path(html.__file__).read_text()
    assert scrub.scrub(ordinary) == ordinary
    stream = scrub.stream()
    pieces = [stream.feed(ordinary[at : at + 4096]) for at in range(0, len(ordinary), 4096)]
    assert "".join(pieces) + stream.flush() == ordinary
