"""Where ``scratchpad vault`` works: through the remote server (``SCRATCHPAD_BACKEND=remote``)
or this home's running server (which holds the
authoritative vault: it registers new secrets with its scrubber and updates running pads),
or, when none runs, on the vault files directly. Both answer the same few questions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

import httpx
from httpx_sse import connect_sse

from scratchpad.cli.background import checked
from scratchpad.config import Settings
from scratchpad.runtime.rescrub import rescrub_home
from scratchpad.scrub import scrubber
from scratchpad.vault.store import Vault

if TYPE_CHECKING:
    from scratchpad.connect.submissions import Submission

REQUEST_TIMEOUT_S = 60.0
Entries = list[dict[str, Any]]  # (the method ``list`` hides the builtin in the classes)
OnEvent = Callable[[dict[str, Any]], None]
Pairs = list[tuple[str, str]]
FieldValues = dict[str, str]
Names = list[str]


class VaultAccess(Protocol):
    """What the vault commands need, on disk or over HTTP."""

    def list(self) -> Entries: ...
    def record(self, engine: str, name: str) -> dict[str, Any]: ...
    def save(
        self, engine: str, name: str | None, fields: FieldValues, secure_keys: Names | None
    ) -> dict[str, Any]: ...
    def delete(self, engine: str, name: str) -> None: ...
    def grant(self, pad: str, engine: str, name: str) -> Pairs: ...
    def revoke(self, pad: str, engine: str, name: str) -> Pairs: ...
    def audit(self, limit: int) -> Entries: ...
    def submit(self, body: dict[str, Any], on_event: OnEvent) -> None: ...
    def test(self, engine: str, name: str, on_event: OnEvent) -> None: ...
    def ready(self) -> None: ...


class DiskVault:
    """The vault files of this home, when no server runs for it."""

    def __init__(self, settings: Settings) -> None:
        self.vault = Vault(settings)

    def list(self) -> Entries:
        return self.vault.list()

    def record(self, engine: str, name: str) -> dict[str, Any]:
        return self.vault.record(engine, name)

    def save(
        self, engine: str, name: str | None, fields: FieldValues, secure_keys: Names | None
    ) -> dict[str, Any]:
        """Save; a secret new to this home is scrubbed from what the home already stores (no
        server runs, so no pad is running: the files are all there is)."""
        self.vault.prime()
        before = scrubber().version
        record = self.vault.save(engine, name or self.vault.next_name(engine), fields, secure_keys)
        if scrubber().version != before:
            rescrub_home(self.vault.settings)
        return record

    def delete(self, engine: str, name: str) -> None:
        self.vault.delete(engine, name)

    def grant(self, pad: str, engine: str, name: str) -> Pairs:
        self.vault.grant(pad, engine, name)
        return self.vault.grants(pad)

    def revoke(self, pad: str, engine: str, name: str) -> Pairs:
        self.vault.revoke(pad, engine, name)
        return self.vault.grants(pad)

    def audit(self, limit: int) -> Entries:
        return self.vault.audit.read(limit)

    def ready(self) -> None:
        """The probe's model can be made here (else its error, naming the setting)."""
        from scratchpad.connect.credentials import probe_provider

        probe_provider(self.vault.settings)

    def submit(self, body: dict[str, Any], on_event: OnEvent) -> None:
        """Probe a submission here (``body`` as the HTTP endpoint takes it)."""
        from scratchpad.connect.credentials import stage

        self._probe(
            lambda: stage(
                body["form_spec"], body["values"], body.get("skipped", ()),
                form_id=body.get("form_id"), connection_name=body.get("connection_name"),
            ), None, on_event,
        )  # fmt: skip

    def test(self, engine: str, name: str, on_event: OnEvent) -> None:
        from scratchpad.connect.credentials import saved_submission

        self._probe(lambda: saved_submission(self.vault, engine, name), (engine, name), on_event)

    def _probe(
        self, staged: Callable[[], Submission], saved: tuple[str, str] | None, on_event: OnEvent
    ) -> None:
        from scratchpad.connect.credentials import probe_provider, run_probe

        settings = self.vault.settings
        provider = probe_provider(settings)
        submission = staged()
        before = scrubber().version

        async def follow() -> None:
            async for event in run_probe(
                submission, provider=provider, vault=self.vault, saved=saved
            ):
                on_event(event)

        asyncio.run(follow())
        if scrubber().version != before:  # a saved secret, new to this home
            rescrub_home(settings)


class HttpVault:
    """The vault of this home's running server, through its HTTP API."""

    def __init__(self, url: str, api_key: str) -> None:
        self._client = httpx.Client(
            base_url=url,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=REQUEST_TIMEOUT_S,
        )

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        return checked(self._client.request(method, path, **kwargs)).json()

    def list(self) -> Entries:
        return list(self._call("GET", "/v1/datasources")["datasources"])

    def record(self, engine: str, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/v1/datasources/{_seg(engine)}/{_seg(name)}"))

    def save(
        self, engine: str, name: str | None, fields: FieldValues, secure_keys: Names | None
    ) -> dict[str, Any]:
        body = {"engine": engine, "name": name, "fields": fields, "secure_keys": secure_keys}
        return dict(self._call("POST", "/v1/datasources", json=body))

    def delete(self, engine: str, name: str) -> None:
        self._call("DELETE", f"/v1/datasources/{_seg(engine)}/{_seg(name)}")

    def grant(self, pad: str, engine: str, name: str) -> Pairs:
        body = {"engine": engine, "name": name}
        return _connections(self._call("PUT", f"/v1/pads/{_seg(pad)}/grants", json=body))

    def revoke(self, pad: str, engine: str, name: str) -> Pairs:
        path = f"/v1/pads/{_seg(pad)}/grants/{_seg(engine)}/{_seg(name)}"
        return _connections(self._call("DELETE", path))

    def audit(self, limit: int) -> Entries:
        return list(self._call("GET", "/v1/vault/audit", params={"limit": limit})["entries"])

    def ready(self) -> None:
        """The server makes the probe's model when a submission comes (its error then)."""

    def submit(self, body: dict[str, Any], on_event: OnEvent) -> None:
        self._stream("/v1/datavault/submissions", body, on_event)

    def test(self, engine: str, name: str, on_event: OnEvent) -> None:
        self._stream(f"/v1/datasources/{_seg(engine)}/{_seg(name)}/test", None, on_event)

    def _stream(self, path: str, body: dict[str, Any] | None, on_event: OnEvent) -> None:
        """The server's event stream, each event to ``on_event`` (errors before it started
        raised as the server's error class)."""
        with connect_sse(self._client, "POST", path, json=body) as source:
            checked(source.response)
            for event in source.iter_sse():
                if event.data:
                    on_event(json.loads(event.data))


def _seg(text: str) -> str:
    return quote(text, safe="")


def _connections(answer: dict[str, Any]) -> Pairs:
    return [(c["engine"], c["name"]) for c in answer["connections"]]


def open_vault(settings: Settings) -> VaultAccess:
    """The vault of the remote server named by settings, or of the server running for this
    home, else the files."""
    from scratchpad.cli.background import running_endpoint

    if settings.backend == "remote":
        return HttpVault(settings.remote_url or "", settings.remote_api_key or "")
    endpoint = running_endpoint(settings)
    if endpoint is None:
        return DiskVault(settings)
    return HttpVault(endpoint.url, endpoint.api_key)
