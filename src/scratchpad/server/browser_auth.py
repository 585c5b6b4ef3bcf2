"""Browser sessions, in memory: one-time login tokens (in a link printed to the person who runs
the server) and the sessions they turn into. A restart forgets them all, so a browser logs in
again with a fresh link.

A session's id travels only in the ``X-Scratchpad-Session`` header, which the page's script
adds from the tab's ``sessionStorage``; never in a cookie: browsers send cookies to every port
of a host, so a program serving another port of ``127.0.0.1`` (a pad's web app) would receive
one and could replay it. What a browser fetches without script (a download, an image) carries
a signed URL instead: ``sig=<handle>.<expiry>.<mac>``, good for one path and its query, for
``SIGNED_TTL_S``, and only while the session that signed it lives. Its handle names the
session without being its id.

A scope says what a session may reach: ``"all"`` (what the API key can do) or
``"form:<form_id>"`` (only the credential form of that form). The page a link opens is kept
with its token, never put in the URL, so a link cannot be bent to send someone elsewhere.

Every session belongs to a login: a link made with the API key (the banner, ``scratchpad
login``, a model's form link) starts a new one; a link made by a session belongs to that
session's login. Logging out ends the whole login: every session of it, and every link it made
that was not used yet.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from urllib.parse import urlencode

from starlette.requests import HTTPConnection

from scratchpad.errors import InvalidInputError
from scratchpad.vault.formcheck import FORM_ID_RE

SESSION_HEADER = "x-scratchpad-session"
SIGNATURE_PARAM = "sig"
LOGIN_TTL_S = 600.0
SIGNED_TTL_S = 120  # a signed URL is made when the person clicks; the browser uses it at once
FULL = "all"
FORM_PREFIX = "form:"
MAX_PENDING = 1000  # unredeemed tokens kept at once; the oldest go first
# What a browser may fetch through a signed URL: downloads, GET only (route templates).
SIGNABLE = (
    "/v1/pads/{name}/files/{path}",
    "/v1/pads/{name}/notebook",
    "/v1/pads/{name}/dump",
)
_SIGNABLE = re.compile(
    "|".join(
        re.escape(template).replace(r"\{name\}", "[^/]+").replace(r"\{path\}", ".+")
        for template in SIGNABLE
    )
)
_NEXT = re.compile(r"/(?![/\\])[\x21-\x7e]*")  # a path on this server: no '//', no scheme


@dataclass(frozen=True, slots=True)
class _Grant:
    scope: str
    next_path: str
    expires: float
    login: str | None  # the login of the session that made it; None: a new login


@dataclass(frozen=True, slots=True)
class _Session:
    scope: str
    expires: float
    login: str
    handle: str  # names the session in signed URLs


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
        self._sessions: dict[str, _Session] = {}
        self._handles: dict[str, str] = {}  # handle → session id
        self._key = secrets.token_bytes(32)  # signs URLs; dies with the process

    def grant(
        self,
        scope: str = FULL,
        next_path: str = "/",
        ttl_s: float = LOGIN_TTL_S,
        by: str | None = None,
    ) -> str:
        """A one-time login token for ``scope`` that opens ``next_path``; ``by``: the session
        that asks for it (the token then ends with that session's login)."""
        check_scope(scope)
        check_next(next_path)
        self._purge()
        maker = self._live(by) if by is not None else None
        login = maker.login if maker is not None else None
        while len(self._tokens) >= MAX_PENDING:
            del self._tokens[next(iter(self._tokens))]
        token = secrets.token_urlsafe(32)
        self._tokens[token] = _Grant(scope, next_path, time.monotonic() + ttl_s, login)
        return token

    def link(
        self, base_url: str, scope: str = FULL, next_path: str = "/", by: str | None = None
    ) -> str:
        token = self.grant(scope, next_path, by=by)
        return f"{base_url.rstrip('/')}/login?token={token}"

    def pending(self, token: str) -> bool:
        """Whether ``token`` would log a browser in (it is not used up)."""
        grant = self._tokens.get(token)
        return grant is not None and grant.expires > time.monotonic()

    def redeem(self, token: str) -> Login | None:
        """A new session for a live token (which is then used up); None for any other."""
        grant = self._tokens.pop(token, None)
        if grant is None or grant.expires <= time.monotonic():
            return None
        self._purge()
        session_id, handle = secrets.token_urlsafe(32), secrets.token_urlsafe(12)
        login = grant.login or secrets.token_urlsafe(12)
        expires = time.monotonic() + self.session_ttl_s
        self._sessions[session_id] = _Session(grant.scope, expires, login, handle)
        self._handles[handle] = session_id
        return Login(session_id, grant.scope, grant.next_path)

    def scope_of(self, session_id: str) -> str | None:
        """The scope of a live session, else None."""
        found = self._live(session_id)
        return found.scope if found else None

    def log_out(self, session_id: str) -> int:
        """End the login of ``session_id``: its sessions and its unused links. How many
        sessions ended."""
        found = self._sessions.get(session_id)
        if found is None:
            return 0
        for token in [t for t, g in self._tokens.items() if g.login == found.login]:
            del self._tokens[token]
        ended = [sid for sid, s in self._sessions.items() if s.login == found.login]
        for sid in ended:
            self._end(sid)
        return len(ended)

    def sign(self, session_id: str, target: str) -> tuple[str, float]:
        """A signature for GET ``target`` (a canonical path and query, see
        :func:`signed_target`) on behalf of a live session; and its expiry (epoch seconds)."""
        session = self._live(session_id)
        if session is None:
            raise InvalidInputError("this browser session has ended: log in again")
        expires = int(time.monotonic()) + SIGNED_TTL_S
        mac = self._mac(session.handle, expires, target)
        return f"{session.handle}.{expires}.{mac}", time.time() + SIGNED_TTL_S

    def signed(self, signature: str, target: str) -> tuple[str, str] | None:
        """(session id, scope) of a valid signature for ``target``, else None."""
        handle, _, rest = signature.partition(".")
        expires, _, mac = rest.partition(".")
        session_id = self._handles.get(handle, "")
        session = self._live(session_id)
        if session is None or not (expires.isascii() and expires.isdigit()):
            return None
        if int(expires) <= time.monotonic():
            return None
        expected = self._mac(handle, int(expires), target)
        if not hmac.compare_digest(mac.encode(), expected.encode()):  # mac: any text sent
            return None
        return session_id, session.scope

    def _mac(self, handle: str, expires: int, target: str) -> str:
        message = f"{handle}\n{expires}\n{target}".encode()
        digest = hmac.new(self._key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def _live(self, session_id: str) -> _Session | None:
        found = self._sessions.get(session_id)
        if found is not None and found.expires <= time.monotonic():
            self._end(session_id)
            return None
        return found

    def _end(self, session_id: str) -> None:
        found = self._sessions.pop(session_id, None)
        if found is not None:
            self._handles.pop(found.handle, None)

    def _purge(self) -> None:
        now = time.monotonic()
        for token in [t for t, g in self._tokens.items() if g.expires <= now]:
            del self._tokens[token]
        for sid in [s for s, found in self._sessions.items() if found.expires <= now]:
            self._end(sid)


def check_scope(scope: str) -> str:
    if scope == FULL or (
        scope.startswith(FORM_PREFIX) and FORM_ID_RE.fullmatch(scope[len(FORM_PREFIX) :])
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


def signable(path: str) -> bool:
    """Whether a browser may GET ``path`` (canonical) through a signed URL."""
    return _SIGNABLE.fullmatch(path) is not None


def signed_target(path: str, pairs: list[tuple[str, str]]) -> str:
    """What a signature covers: the canonical path and the query parameters but the
    signature's own, in their order."""
    kept = [(k, v) for k, v in pairs if k != SIGNATURE_PARAM]
    return f"{path}?{urlencode(kept)}"


def auth_of(connection: HTTPConnection) -> str | None:
    """Who the guard let in: "bearer", "all", "form:<id>", or None (an open path)."""
    found = connection.scope.get("state", {}).get("auth")
    return found if isinstance(found, str) else None


def session_of(connection: HTTPConnection) -> str | None:
    """The browser session a request came with (its header or a signed URL), else None."""
    found = connection.scope.get("state", {}).get("session")
    return found if isinstance(found, str) else None


def form_scope(connection: HTTPConnection) -> str | None:
    """The form id a form-scoped browser session is limited to; None for every other caller."""
    found = auth_of(connection)
    if found is not None and found.startswith(FORM_PREFIX):
        return found[len(FORM_PREFIX) :]
    return None
