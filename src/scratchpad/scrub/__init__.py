"""The one scrubber: every secret value this process knows, removed from text on its way out.

A leaf service: it imports nothing of the rest of Scratchpad but the file helpers, so every
part (pads, the vault, the observation store, the edges) can use it. The vault, the server
and the process's environment tell it secrets (:func:`register`); text on every path out
passes :func:`scrub` (or a stream of :meth:`Scrubber.stream`), a display's bundle
:func:`scrub_bundle` (PNG text chunks stripped: :mod:`scratchpad.scrub.png`). What it matches
is in :mod:`scratchpad.scrub.forms` and :mod:`scratchpad.scrub.matcher`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from scratchpad.scrub.forms import MIN_SECRET_CHARS
from scratchpad.scrub.matcher import Scrubber, StreamScrubber
from scratchpad.scrub.patterns import REDACTED
from scratchpad.scrub.png import strip_png_text

__all__ = [
    "BAD_PNG",
    "MIN_SECRET_CHARS",
    "REDACTED",
    "Scrubber",
    "StreamScrubber",
    "register",
    "scrub",
    "scrub_bundle",
    "scrub_logs",
    "scrubber",
]

_SCRUBBER = Scrubber()


def scrubber() -> Scrubber:
    """The process's scrubber."""
    return _SCRUBBER


def scrub(text: str) -> str:
    """``text`` scrubbed by the process's scrubber."""
    return _SCRUBBER.scrub(text)


BINARY_IMAGE_MIMES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"})
BAD_PNG = "[an image/png that is no well-formed PNG was left out]"
"""What stands for a display's PNG that is not one (it is left out)."""


def scrub_bundle(bundle: dict[str, Any], scrub: Scrubber | None = None) -> dict[str, Any]:
    """A display's mime bundle with its text scrubbed, mime names included; a PNG loses its
    text chunks (a malformed one is left out, saying so), other base64 images are left as they
    are (an SVG is text and is scrubbed)."""
    scrub = scrub or _SCRUBBER
    cleaned: dict[str, Any] = {}
    for mime, value in bundle.items():
        if mime == "image/png":
            value = strip_png_text(value) if isinstance(value, str) else None
            if value is None:
                continue
        elif mime not in BINARY_IMAGE_MIMES:
            value = scrub.scrub_data(value)
        cleaned[scrub.scrub(mime)] = value
    if len(cleaned) < len(bundle) and "text/plain" not in cleaned:
        cleaned["text/plain"] = BAD_PNG
    return cleaned


_log_formatter = logging.Formatter()


def scrub_logs() -> None:
    """Scrub every log record this process makes, whichever handler writes it: the message
    with its arguments and the traceback text are scrubbed when the record is made."""
    make = logging.getLogRecordFactory()
    if getattr(make, "scrubs", False):
        return

    def scrubbed_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            record.msg, record.args = _SCRUBBER.scrub(record.getMessage()), None
        except Exception:  # a bad format string: leave it to the handler's own error path
            return record
        if record.exc_info and not record.exc_text:
            record.exc_text = _SCRUBBER.scrub(_log_formatter.formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = _SCRUBBER.scrub(record.stack_info)
        return record

    scrubbed_record.scrubs = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(scrubbed_record)


def register(secrets: Iterable[tuple[str, str | None]], *, provisional: bool = False) -> int:
    """Register (value, name) pairs with the process's scrubber; how many forms were new.
    ``provisional``: the names hold until the value is registered under a lasting one (a
    value under test, named as its probe sees it, then saved as a pad's variable)."""
    return _SCRUBBER.add_many(dict(secrets), provisional=provisional)
