"""Workspace secrets: ``<home>/.env`` (``<workspace>/.scratchpad/.env`` when a workspace is
bound), ``KEY=VALUE`` lines given to every pad as they are written.

The usual dotenv shapes are read: comments, blank lines, an ``export`` prefix, single quotes
(taken literally) and double quotes (with ``\\n``, ``\\t``, ``\\"`` and ``\\\\`` escapes), and an
inline ``# comment`` after an unquoted value. Lines that are none of these are skipped with a
warning naming the line number, never the line (it may hold a secret).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from urllib.parse import urlsplit

from scratchpad.vault.names import looks_secret

log = logging.getLogger(__name__)
ENV_FILE = ".env"
LINE_RE = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*")
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


# A token: 16+ characters of token alphabet with a letter and a digit, or 20+ letters mixed in
# case like random ones; never a path, and no run of seven one-case letters (a word).
TOKEN_LIKE = re.compile(
    r"(?![/.~])(?!.*[a-z]{7})(?!.*[A-Z]{7})(?=.*[0-9])(?=.*[A-Za-z])[A-Za-z0-9_\-+/=.~]{16,}"
)
LETTERS_TOKEN = re.compile(r"[A-Za-z]{20,}")


def looks_like_token(value: str) -> bool:
    """Whether a value with no telling name is shaped like a generated secret."""
    if TOKEN_LIKE.fullmatch(value):
        return True
    if not LETTERS_TOKEN.fullmatch(value):
        return False
    upper = sum(char.isupper() for char in value) / len(value)
    vowels = sum(char in "aeiouAEIOU" for char in value) / len(value)
    return 0.3 <= upper <= 0.7 or vowels < 0.25  # words: few capitals, many vowels


def secrets_of(env: dict[str, str]) -> list[tuple[str, str]]:
    """(value, variable) of the variables that hold secrets: named like one (password,
    token, key, ``DB_PASS``, ``MYSQL_PWD``, ...), a URL's password, or a value shaped like a
    generated token. Plain settings (``MODE=production``, ``HOST=localhost``, a path) are
    not: they would redact ordinary words."""
    found = []
    for name, value in env.items():
        if looks_secret(name) or looks_like_token(value):
            found.append((value, name))
        password = _url_password(value)
        if password:
            found += [(value, name), (password, name)]
    return list(dict.fromkeys(found))


def _url_password(value: str) -> str | None:
    try:
        return urlsplit(value).password if "://" in value else None
    except ValueError:
        return None


def parse(text: str, source: str = ".env") -> dict[str, str]:
    """The variables of a dotenv text (a later line wins over an earlier one)."""
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = LINE_RE.fullmatch(line)
        value = _value(match.group(2)) if match else None
        if match is None or value is None or "\0" in value:  # no environment holds a NUL
            log.warning("%s line %d is not KEY=VALUE; it is skipped", source, number)
            continue
        found[match.group(1)] = value
    return found


def _value(raw: str) -> str | None:
    """A value as written: quoted (one of two kinds) or bare; None when quotes do not close."""
    if raw[:1] in ("'", '"'):
        quote = raw[0]
        end = _closing(raw, quote)
        if end is None or raw[end + 1 :].strip()[:1] not in ("", "#"):
            return None
        inner = raw[1:end]
        if quote == "'":
            return inner
        return re.sub(r"\\(.)", lambda m: ESCAPES.get(m.group(1), m.group(0)), inner)
    return re.split(r"\s+#", raw, maxsplit=1)[0].strip()


def _closing(raw: str, quote: str) -> int | None:
    index = 1
    while index < len(raw):
        if raw[index] == "\\" and quote == '"':
            index += 2
            continue
        if raw[index] == quote:
            return index
        index += 1
    return None


def read_env_file(path: Path) -> dict[str, str]:
    """The variables of ``path``; none when it does not exist or cannot be read (warned)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        log.warning("cannot read %s (%s); pads get no workspace secrets", path, exc.strerror)
        return {}
    return parse(text, str(path))
