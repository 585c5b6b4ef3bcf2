"""The scrubber's corpus: secrets, a cell that prints them in every form a leak takes, the
strings whose presence anywhere counts as a leak, and ordinary text that must pass unchanged.

The leak probes are computed here independently of the scrubber's own encodings, so a form
the scrubber forgot shows up as a leak rather than as a matching blind spot.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

from scratchpad.runtime.cell import Cell, DisplayEvent, OutputEvent, ProgressEvent

# Registered secrets: variable name → value (an awkward password, a token, a multi-line key).
SECRETS = {
    "DS_POSTGRES_PROD__PASSWORD": 'p@ss"w0rd/wi\\th+odd&chars=',
    "DS_HTTP_BILLING__TOKEN": "tok_9f8e7d6c5b4a3210fedcba98",
    "DS_SSH_DEPLOY__PRIVATE_KEY": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB\n"
        "QyNTUxOQAAACBmZXN0aXZhbC1vZi1rZXlzLWFuZC1zZWNyZXRzIQ\n"
        "-----END OPENSSH PRIVATE KEY-----"
    ),
}

# Key-shaped strings nobody registered: caught by shape.
UNKNOWN_KEYS = [
    "sk-ant-api03-Zx81kQmP0vR2sT4uW6yA8cE0gI2kM4oQ6sU8wY0aC2eG4",
    "sk-proj-Qw3rTy6uIo9pAs2dFg5hJk8lZx1cVb4nM7qWe0rTy3u",
    "AIzaSyD3f8gH2jK4lM6nP8qR0sT2uV4wX6yZ8aBcD",
    "ghp_R2d2C3p0BB8bb8Xw1ngY0daK3r3k4lM6nP8qR0",
    "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789ABCDEFGHIJ",
    "xoxb-1234567890123-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "AKIAIOSFODNN7EXAMPLE",
]

# Ordinary text that must come out exactly as it went in.
CONTROL_LINES = [
    "The quick brown fox jumps over the lazy dog; 42 rows in 0.318s.",
    "SELECT id, name FROM users WHERE created_at > '2024-01-01' LIMIT 10;",
    'Traceback (most recent call last): File "<cell>", line 3, in <module>',
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "git 3f786850e387550fdab836ed7e6dc881de23001b merged into main",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "aGVsbG8gd29ybGQ= is 'hello world' in base64",
    "https://example.com/search?q=task-force&page=2&sort=desc#results",
    '{"password": "<hidden>", "user": "analyst", "port": 5432, "ssl": true}',
    "scikit-learn sk-learn risk-assessment-framework-for-the-task-list",
    "AKIA is the prefix of AWS access key ids; AIza starts Google keys.",
    "ghp_ and github_pat_ start GitHub tokens, xoxb- starts Slack bot tokens.",
    "/home/analyst/projects/report/data/2024-q3/sales_by_region.parquet",
    "mean=0.4821 std=0.1177 n=100000 p<0.001 r^2=0.93",
    "password = os.environ['DS_POSTGRES_PROD__PASSWORD']  # read, never printed",
]


def leak_probes(value: str) -> set[str]:
    """Strings whose presence in any output means ``value`` leaked (in some form)."""
    raw = value.encode()
    probes = {value, quote(value, safe=""), quote_plus(value), raw.hex(), raw.hex().upper()}
    probes.add(json.dumps(value)[1:-1])
    for prefix in (b"", b"x", b"u:", b"user:"):  # shifts 0, 1, 2 and 2 with another lead
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(prefix + raw).decode()
            probes.add(text[len(prefix) * 2 : -4])  # the middle: this value's bits alone
    for line in value.splitlines():
        if len(line.strip()) >= 12:
            probes.add(line.strip())
    return {probe for probe in probes if len(probe) >= 8}


# Known secrets leak in any form; unknown keys are caught by their shape, so as themselves.
ALL_PROBES = {probe for value in SECRETS.values() for probe in leak_probes(value)}
ALL_PROBES.update(UNKNOWN_KEYS)

FORMS = [
    "raw",
    "stderr",
    "base64",
    "base64 url-safe",
    "base64 shifted by 1",
    "base64 shifted by 2",
    "url-encoded",
    "url-encoded (plus)",
    "hex",
    "HEX",
    "json-escaped",
    "repr",
    "split across two writes",
    "line by line",
    "progress message",
    "display (text/plain)",
    "last expression (result)",
    "exception message",
]

CELL = """
import base64, json, sys, time, urllib.parse
secrets = SECRETS
for v in secrets:
    b = v.encode()
    print(v)
    print(v, file=sys.stderr)
    print(base64.b64encode(b).decode())
    print(base64.urlsafe_b64encode(b).decode())
    print(base64.b64encode(b"x" + b).decode())
    print(base64.b64encode(b"user:" + b).decode())
    print(urllib.parse.quote(v, safe=""))
    print(urllib.parse.quote_plus(v))
    print(b.hex())
    print(b.hex().upper())
    print(json.dumps({"password": v}))
    print(repr(v))
    sys.stdout.write("split:" + v[:5]); sys.stdout.flush(); time.sleep(0.02)
    sys.stdout.write(v[5:] + "\\n"); sys.stdout.flush()
    for line in v.splitlines():
        print(line)
    progress("connecting with " + v)
    display({"text/plain": "shown: " + v})
"""


def printed_forms(value: str) -> list[str]:
    """What :data:`CELL` prints of ``value`` (for checks without a kernel)."""
    raw = value.encode()
    return [
        value,
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode(),
        base64.b64encode(b"x" + raw).decode(),
        base64.b64encode(b"user:" + raw).decode(),
        quote(value, safe=""),
        quote_plus(value),
        raw.hex(),
        raw.hex().upper(),
        json.dumps({"password": value}),
        repr(value),
        *value.splitlines(),
    ]


def secret_cell(*, fail: bool = False) -> str:
    """A cell printing every secret in every form; it ends with the secrets as its result
    (or, with ``fail``, raises with them in the message)."""
    values = [*SECRETS.values(), *UNKNOWN_KEYS]
    last = "raise RuntimeError(repr(secrets))" if fail else "secrets"
    return CELL.replace("SECRETS", repr(values), 1) + last + "\n"


CONTROL_CELL = "print(" + repr("\n".join(CONTROL_LINES)) + ")\n"


def leaks(text: str) -> list[str]:
    """The probes found in ``text`` (each counted once)."""
    return sorted(probe for probe in ALL_PROBES if probe in text)


def everything_in(home: Path) -> str:
    """Every byte of every file under ``home`` (as text), for a leak search."""
    texts = []
    for path in sorted(home.rglob("*")):
        if path.is_file() and not path.is_symlink():
            texts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(texts)


def streamed(items: list[Any]) -> str:
    parts = []
    for item in items:
        if isinstance(item, OutputEvent):
            parts.append(item.text)
        elif isinstance(item, ProgressEvent):
            parts.append(item.message)
        elif isinstance(item, DisplayEvent):
            parts.append(json.dumps(item.data))
        elif isinstance(item, Cell):
            parts.append(json.dumps(item.to_dict()))
    return "\n".join(parts)
