"""Login tokens and URL signatures stay out of the server's log: uvicorn's access log writes
each request's path with its query string, and ``/login?token=…`` (or a download's
``?sig=…``) would leave a working link there (it is quiet at the default level, but a level
changed for debugging must not leak). Session ids travel in a header, which uvicorn never
logs."""

from __future__ import annotations

import logging
import re

ACCESS_LOGGER = "uvicorn.access"
_TOKEN = re.compile(r"([?&](?:token|sig)=)[^&\s\"]*")


class HideTokens(logging.Filter):
    """Replaces the value of every ``token=`` and ``sig=`` query parameter in a record's
    arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_hidden(arg) for arg in record.args)
        record.msg = _hidden(record.msg)
        return True


def _hidden(value: object) -> object:
    if isinstance(value, str) and ("token=" in value or "sig=" in value):
        return _TOKEN.sub(r"\1[hidden]", value)
    return value


def hide_tokens() -> None:
    """Install the filter on uvicorn's access logger (once)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, HideTokens) for f in logger.filters):
        logger.addFilter(HideTokens())
