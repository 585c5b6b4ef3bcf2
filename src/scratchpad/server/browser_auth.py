"""Browser sessions, in memory: one-time login tokens (in a link printed to the person who runs
the server) and the session ids they turn into (in an HttpOnly cookie). A restart forgets
them all, so a browser logs in again with a fresh link.

A scope says what a session may reach: ``"all"`` (what the API key can do) or
``"form:<form_id>"`` (only the credential form of that form). The page a link opens is kept
with its token, never put in the URL, so a link cannot be bent to send someone elsewhere.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass

from starlette.requests import HTTPConnection

from scratchpad.errors import InvalidInputError

SESSION_COOKIE = "scratchpad_session"
LOGIN_TTL_S = 600.0
FULL = "all"
FORM_PREFIX = "form:"
MAX_PENDING = 1000  # unredeemed tokens kept at once; the oldest go first
_FORM_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # as vault/formcheck.py FORM_ID_RE
_NEXT = re.compile(r"/(?![/\\])[\x21-\x7e]*")  # a path on this server: no '//', no scheme


@dataclass(frozen=True, slots=True)
class _Grant:
    scope: str
    next_path: str
    expires: float


@dataclass(frozen=True, slots=True)
class Login:
    """What redeeming a token gives: the new session's id and scope, and where to go."""

    session_id: str
    scope: str
    next_path: str


class BrowserSessions:
    """Tokens waiting to be redeemed (once) and live sessions (``session_ttl_s`` each)."""

    def __init__(self, session_ttl_s: float = 12 * 3600.0) -> None:
        self.session_ttl_s = session_ttl_s
        self._tokens: dict[str, _Grant] = {}
        self._sessions: dict[str, tuple[str, float]] = {}

    def grant(self, scope: str = FULL, next_path: str = "/", ttl_s: float = LOGIN_TTL_S) -> str:
        """A one-time login token for ``scope`` that opens ``next_path``."""
        check_scope(scope)
        check_next(next_path)
        self._purge()
        while len(self._tokens) >= MAX_PENDING:
            del self._tokens[next(iter(self._tokens))]
        token = secrets.token_urlsafe(32)
        self._tokens[token] = _Grant(scope, next_path, time.monotonic() + ttl_s)
        return token

    def link(self, base_url: str, scope: str = FULL, next_path: str = "/") -> str:
        return f"{base_url.rstrip('/')}/login?token={self.grant(scope, next_path)}"

    def redeem(self, token: str) -> Login | None:
        """A new session for a live token (which is then used up); None for any other."""
        grant = self._tokens.pop(token, None)
        if grant is None or grant.expires <= time.monotonic():
            return None
        self._purge()
        session_id = secrets.token_urlsafe(32)
        self._sessions[session_id] = (grant.scope, time.monotonic() + self.session_ttl_s)
        return Login(session_id, grant.scope, grant.next_path)

    def scope_of(self, session_id: str) -> str | None:
        """The scope of a live session, else None."""
        found = self._sessions.get(session_id)
        if found is None:
            return None
        if found[1] <= time.monotonic():
            del self._sessions[session_id]
            return None
        return found[0]

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def _purge(self) -> None:
        now = time.monotonic()
        for token in [t for t, g in self._tokens.items() if g.expires <= now]:
            del self._tokens[token]
        for sid in [s for s, (_, until) in self._sessions.items() if until <= now]:
            del self._sessions[sid]


def check_scope(scope: str) -> str:
    if scope == FULL or (
        scope.startswith(FORM_PREFIX) and _FORM_ID.fullmatch(scope[len(FORM_PREFIX) :])
    ):
        return scope
    raise InvalidInputError(
        f"unknown session scope {scope!r}: use 'all' or 'form:<form_id>' (form ids are 1 to 64 "
        "letters, digits, '_', '.' or '-')"
    )


def check_next(next_path: str) -> str:
    if len(next_path) <= 2048 and _NEXT.fullmatch(next_path):
        return next_path
    raise InvalidInputError(
        f"next must be a path on this server starting with one '/', e.g. '/' or '/connect/f1'; "
        f"got {next_path[:100]!r}"
    )


def auth_of(connection: HTTPConnection) -> str | None:
    """Who the guard let in: "bearer", "all", "form:<id>", or None (an open path)."""
    found = connection.scope.get("state", {}).get("auth")
    return found if isinstance(found, str) else None


def form_scope(connection: HTTPConnection) -> str | None:
    """The form id a form-scoped browser session is limited to; None for every other caller."""
    found = auth_of(connection)
    if found is not None and found.startswith(FORM_PREFIX):
        return found[len(FORM_PREFIX) :]
    return None
