"""Careless cells: each prints a secret of the vault or of the workspace ``.env`` in one form a
careless cell gives it, and says which strings in any output would mean it leaked.

The probes are computed here, the way the cell computes what it prints, never from the
scrubber's own forms: a form the scrubber forgot shows up as a leak.
"""

from __future__ import annotations

import base64
import html
import inspect
import random
import re
import shlex
import struct
import zlib
from dataclasses import dataclass
from urllib.parse import quote
from xml.sax.saxutils import escape as xml_escape

# A vault connection (postgres/prod): a non-ASCII password, a long token, and a value full of
# the characters HTML and shells escape.
PASSWORD = "Grüße-Straße-ключ-9Xq"
TOKEN = "".join(
    random.Random(3).choices("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789", k=260)
)
SPECIAL = "Ab&<c>\"d'e-Fg7h!Zq"
VAULT_FIELDS = {"host": "db.internal", "password": PASSWORD, "token": TOKEN, "special": SPECIAL}
VAULT_SECRET_FIELDS = ["password", "token", "special"]
PASSWORD_VAR = "DS_POSTGRES_PROD__PASSWORD"
TOKEN_VAR = "DS_POSTGRES_PROD__TOKEN"
SPECIAL_VAR = "DS_POSTGRES_PROD__SPECIAL"

# The workspace .env: eight secrets by name or shape (the first five were not taken for
# secrets before), and two plain settings that must stay readable.
ENV_SECRETS = {  # passwords shorter than a token: only their names say secret
    "DB_PASS": "Db-pa55!word",
    "PGPASS": "pg!Secr3t#1x",
    "MYSQL_PWD": "My_Sql9_pwdX",  # shaped like a cell id, too
    "ADMIN_PWD": "Adm1n!Pwd%xq",
    "SIGNING_SEED": "QxZvTkWmRpLnBfHjYcDsGtKa",
    "DB_PASSWORD": "dbPassw0rd-Kq8Lm3",
    "STRIPE_API_KEY": "rk_test_51Hq8Lm3Kq9Zx7Vb2Nc4",
    "CACHE_DSN": "redis://:Rd5-pw-Zz81xQ@cache:6379/0",
}
ENV_PLAIN = {"MODE": "production", "HOST": "localhost"}
ENV_FILE = "".join(f"{name}={value}\n" for name, value in {**ENV_SECRETS, **ENV_PLAIN}.items())

OUTPUT_CAP = 4096  # the pads' output cap in these tests: 2048 bytes of head, 2048 of tail
PIECE = 8  # characters of a secret left on each side of a cut


@dataclass(frozen=True)
class Careless:
    """One careless cell: what it runs, and the strings whose presence means a leak."""

    form: str
    code: str
    probes: tuple[str, ...]


def _env(name: str) -> str:
    return f"os.environ[{name!r}]"


def straddling(value: str, head: int, tail: int, total: int) -> str:
    """Text of ``total`` characters cut to its first ``head`` and last ``tail``: ``value`` is
    cut after PIECE characters at the head's end and before its last PIECE at the tail's
    start."""
    first = "." * (head - PIECE) + value
    last = value + "." * (tail - PIECE)
    return first + "," * (total - len(first) - len(last)) + last


def png_with_text(secret: str) -> bytes:
    """A valid 1x1 PNG carrying ``secret`` in a tEXt, a zTXt and an iTXt chunk."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    raw = secret.encode()
    return b"".join(
        [
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)),
            chunk(b"tEXt", b"Comment\0" + raw),
            chunk(b"zTXt", b"Secret\0\0" + zlib.compress(raw)),
            chunk(b"iTXt", b"Key\0\0\0en\0Key\0" + raw),
            chunk(b"IDAT", zlib.compress(b"\0\xff\x00\x00")),
            chunk(b"IEND", b""),
        ]
    )


def _wrapped_lines(value: str) -> tuple[str, ...]:
    """The full lines of ``base64.encodebytes`` of ``value`` (each all made of its bits)."""
    return tuple(base64.encodebytes(value.encode()).decode().splitlines()[:-1])


def _base64_pieces(value: str) -> tuple[str, ...]:
    """A piece of ``value``'s base64 at each of its three alignments."""
    raw = value.encode()
    return tuple(base64.b64encode(lead + raw).decode()[8:48] for lead in (b"", b"x", b"xy"))


def _lower_escapes(text: str) -> str:
    return re.sub("%[0-9A-F]{2}", lambda match: match.group().lower(), text)


CELLS = [
    *(
        Careless(f".env {name}", f"print({name!r}, {_env(name)})", (value,))
        for name, value in ENV_SECRETS.items()
    ),
    Careless("upper()", f"print({_env(PASSWORD_VAR)}.upper())", (PASSWORD.upper(),)),
    Careless("lower()", f"print({_env(TOKEN_VAR)}.lower())", (TOKEN.lower()[:40],)),
    Careless(
        "html.escape",
        f"import html\nprint(html.escape({_env(SPECIAL_VAR)}))",
        (html.escape(SPECIAL),),
    ),
    Careless(
        "xml escape",
        f"from xml.sax.saxutils import escape\nprint(escape({_env(SPECIAL_VAR)}))",
        (xml_escape(SPECIAL),),
    ),
    Careless(
        "html numeric escapes",
        f"import html\nprint(html.escape({_env(SPECIAL_VAR)}).replace('&#x27;', '&#39;'))",
        (html.escape(SPECIAL).replace("&#x27;", "&#39;"),),
    ),
    Careless(
        "shlex.quote",
        f"import shlex\nprint('PGPASSWORD=' + shlex.quote({_env(SPECIAL_VAR)}) + ' psql')",
        (shlex.quote(SPECIAL),),
    ),
    Careless("repr", f"print(repr({_env(PASSWORD_VAR)}))", (repr(PASSWORD),)),
    Careless("ascii()", f"print(ascii({_env(PASSWORD_VAR)}))", (ascii(PASSWORD)[1:-1],)),
    Careless("bytes", f"print({_env(PASSWORD_VAR)}.encode())", (repr(PASSWORD.encode())[2:-1],)),
    Careless("list(secret)", f"print(list({_env(PASSWORD_VAR)}))", (str(list(PASSWORD))[1:-1],)),
    Careless(
        "base64.encodebytes",
        f"import base64\nprint(base64.encodebytes({_env(TOKEN_VAR)}.encode()).decode())",
        _wrapped_lines(TOKEN),
    ),
    Careless(
        "base64.encodebytes (bytes)",
        f"import base64\nprint(base64.encodebytes({_env(TOKEN_VAR)}.encode()))",
        _wrapped_lines(TOKEN),
    ),
    Careless(
        "lowercase %xx",
        "import re, urllib.parse\n"
        f"q = urllib.parse.quote({_env(PASSWORD_VAR)}, safe='')\n"
        "print(re.sub('%[0-9A-F]{2}', lambda m: m.group().lower(), q))",
        (_lower_escapes(quote(PASSWORD, safe="")),),
    ),
    Careless("key[:12]", f"print('token starts', {_env(TOKEN_VAR)}[:12])", (TOKEN[:12],)),
    Careless("key[-14:]", f"print('token ends', {_env(TOKEN_VAR)}[-14:])", (TOKEN[-14:],)),
    Careless("int() error", f"int({_env(TOKEN_VAR)})", (TOKEN[:12], TOKEN[100:140])),
    Careless(
        "straddles the output cap",
        "import sys\nsys.stdout.write("
        f"{straddling.__name__}({_env('MYSQL_PWD')}, {OUTPUT_CAP // 2}, {OUTPUT_CAP // 2}, 6000))",
        (ENV_SECRETS["MYSQL_PWD"][:PIECE], ENV_SECRETS["MYSQL_PWD"][-PIECE:]),
    ),
    Careless(
        "straddles the progress cap",
        f"progress({straddling.__name__}({_env('PGPASS')}, 2000, 2000, 6000))",
        (ENV_SECRETS["PGPASS"][:PIECE], ENV_SECRETS["PGPASS"][-PIECE:]),
    ),
    Careless(
        "PNG text chunks",
        "class Plot:  # an image object that keeps its metadata, as PIL's do\n"
        f"    def _repr_png_(self):\n        return png_with_text({_env(TOKEN_VAR)})\n"
        "display(Plot())",
        _base64_pieces(TOKEN),
    ),
    Careless(
        "a logging record",
        f"import logging\nlogging.getLogger('db').warning('connecting with %s', {_env('DB_PASS')})",
        (ENV_SECRETS["DB_PASS"],),
    ),
    Careless(
        "a rich result's HTML",
        "import html\n"
        "class Table:  # a result shown as a table, as a DataFrame is\n"
        f"    def _repr_html_(self):\n        return html.escape({_env(SPECIAL_VAR)})\n"
        "Table()",
        (html.escape(SPECIAL),),
    ),
    Careless(
        "a rich result's PNG text chunks",
        "class Chart:\n"
        f"    def _repr_png_(self):\n        return png_with_text({_env(TOKEN_VAR)})\n"
        "Chart()",
        _base64_pieces(TOKEN),
    ),
]
# Run once in the pad before the careless cells.
PRELUDE = "\n".join(
    [
        f"import os, struct, zlib\nPIECE = {PIECE}",
        inspect.getsource(straddling).replace("``", ""),
        inspect.getsource(png_with_text),
    ]
)
