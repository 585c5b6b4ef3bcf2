"""The names this server answers to, for requests a browser may have sent on its own.

DNS rebinding: a hostile page's own name, re-pointed at 127.0.0.1, reaches the server with
that name in ``Host``; so a request without the API key must name one of the server's own
addresses (its loopback twins, the bound address, ``SCRATCHPAD_ALLOWED_HOSTS``).
CSRF: a state-changing request carried by a browser session must come from a page of the same
origin (``Origin`` naming the very host the request went to).
"""

from __future__ import annotations

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
ALLOWED_HOSTS_SETTING = "SCRATCHPAD_ALLOWED_HOSTS"


class OwnHosts:
    """``Host`` values (``host:port``) this server accepts from browsers."""

    def __init__(self, origin: str | None, allowed: str = "") -> None:
        self.exact: set[str] = set()
        self.any_port: set[str] = set()
        if origin is None:  # an app without a known address (embedded, tests): loopback only
            self.any_port.update(LOOPBACK_NAMES)
        else:
            host, port = split_host(origin.split("://", 1)[-1].rstrip("/"))
            for name in {*LOOPBACK_NAMES, host}:
                self.exact.add(f"{name}:{port}" if port else name)
                if port in ("", "80"):
                    self.exact.add(name)
        for entry in allowed.split(","):
            self._allow(entry.strip().lower())

    def _allow(self, entry: str) -> None:
        if not entry:
            return
        host, port = split_host(entry)
        if port:
            self.exact.add(f"{host}:{port}")
        else:
            self.any_port.add(host)

    def allows(self, host: str) -> bool:
        """Whether a ``Host`` header names this server."""
        host = host.lower()
        return host in self.exact or split_host(host)[0] in self.any_port

    def refusal(self, host: str) -> str:
        shown = repr(host[:100]) if host else "no Host header"
        return (
            f"this server does not answer browsers under the name {shown}; open it as "
            f"{self.example()}, or add that host[:port] to {ALLOWED_HOSTS_SETTING} "
            "(comma-separated) and restart it"
        )

    def example(self) -> str:
        named = sorted(self.exact) or [f"{name}:<port>" for name in LOOPBACK_NAMES]
        return f"http://{named[0]}"


def split_host(value: str) -> tuple[str, str]:
    """``("[::1]", "8765")`` from ``"[::1]:8765"``, ``("[::1]", "")`` from a bare IPv6
    address, ``("name", "")`` from ``"name"``."""
    if value.startswith("["):
        host, _, rest = value.partition("]")
        return f"{host}]", rest.removeprefix(":")
    if value.count(":") > 1:
        return f"[{value}]", ""
    host, _, port = value.partition(":")
    return host, port


def same_origin(origin: str, host: str) -> bool:
    """Whether an ``Origin`` header names a page of the site at ``host`` (the request's Host,
    already checked): same host and port, over http or https (behind a TLS proxy)."""
    scheme, sep, netloc = origin.lower().partition("://")
    return bool(sep) and scheme in ("http", "https") and netloc == host.lower() != ""


def link_base(origin: str) -> str:
    """Where a login link points for a server at ``origin``: a browser on this machine
    reaches one listening on every interface through loopback."""
    scheme, _, netloc = origin.rstrip("/").partition("://")
    host, port = split_host(netloc)
    host = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]"}.get(host, host)
    return f"{scheme}://{host}:{port}" if port else f"{scheme}://{host}"
