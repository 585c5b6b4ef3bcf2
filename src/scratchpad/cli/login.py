"""``scratchpad login``: a one-time link that logs a browser in to this home's server (started
in the background when none runs, as pad commands do)."""

from __future__ import annotations

import webbrowser

import httpx

from scratchpad.cli.background import checked, endpoint
from scratchpad.config import Settings
from scratchpad.errors import ScratchpadError

REQUEST_TIMEOUT_S = 30.0


def login_url(settings: Settings, next_path: str = "/") -> str:
    """A fresh login link from the server (10 minutes, once)."""
    target = endpoint(settings)
    try:
        answer = httpx.post(
            f"{target.url}/v1/login-links",
            json={"next": next_path},
            headers={"Authorization": f"Bearer {target.api_key}"},
            timeout=REQUEST_TIMEOUT_S,
        )
    except httpx.HTTPError as exc:
        raise ScratchpadError(f"the server at {target.url} did not answer: {exc}") from None
    return str(checked(answer).json()["url"])


def open_in_browser(url: str) -> bool:
    """Whether a browser was started for ``url`` (none on a headless machine)."""
    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False
