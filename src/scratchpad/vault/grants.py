"""Which connections each pad gets.

Without grants of its own a pad gets every connection (``SCRATCHPAD_VAULT_DEFAULT_GRANT=all``)
or none (``none``). ``grant`` and ``revoke`` record per pad an allow list and a deny list, so
both settings mean what they say: under ``all`` a revoked connection stays out (and a new one
comes in); under ``none`` only granted ones come in. Stored atomically, 0600, in
``<home>/vault/grants.json`` — names only.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Literal

from scratchpad.errors import VaultError
from scratchpad.fsutil import PRIVATE_FILE_MODE, atomic_write_text, private_dir
from scratchpad.padnames import validate_pad_name

GRANTS_FILE = "grants.json"
Connection = tuple[str, str]


def key(engine: str, name: str) -> str:
    return f"{engine}/{name}"


class Grants:
    """The grants of one vault directory (read from disk on every question: other processes
    may change them)."""

    def __init__(self, directory: Path, default: Literal["all", "none"] = "all") -> None:
        self.path = directory / GRANTS_FILE
        self.default = default
        self._lock = threading.Lock()

    def connections(self, pad: str, existing: list[Connection]) -> list[Connection]:
        """The connections of ``existing`` that pad ``pad`` gets."""
        entry = self._read().get(validate_pad_name(pad), {})
        allow, deny = set(entry.get("allow", [])), set(entry.get("deny", []))
        if self.default == "all":
            return [c for c in existing if key(*c) not in deny]
        return [c for c in existing if key(*c) in allow]

    def grant(self, pad: str, engine: str, name: str) -> None:
        self._change(pad, key(engine, name), add_to="allow", remove_from="deny")

    def revoke(self, pad: str, engine: str, name: str) -> None:
        self._change(pad, key(engine, name), add_to="deny", remove_from="allow")

    def forget(self, engine: str, name: str) -> None:
        """Drop a deleted connection from every pad's lists (a new one of that name starts
        from the default)."""
        gone = key(engine, name)
        with self._lock:
            data = self._read()
            for entry in data.values():
                for kind in ("allow", "deny"):
                    if gone in entry.get(kind, []):
                        entry[kind].remove(gone)
            self._write(data)

    def _change(self, pad: str, connection: str, *, add_to: str, remove_from: str) -> None:
        pad = validate_pad_name(pad)
        with self._lock:
            data = self._read()
            entry = data.setdefault(pad, {"allow": [], "deny": []})
            if connection in entry.setdefault(remove_from, []):
                entry[remove_from].remove(connection)
            if connection not in entry.setdefault(add_to, []):
                entry[add_to].append(connection)
            self._write(data)

    def _read(self) -> dict[str, dict[str, list[str]]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise VaultError(
                f"{self.path} cannot be read ({exc}); fix or delete it (pads then get the "
                "default grants)"
            ) from exc
        pads = data.get("pads") if isinstance(data, dict) else None
        return pads if isinstance(pads, dict) else {}

    def _write(self, pads: dict[str, dict[str, list[str]]]) -> None:
        private_dir(self.path.parent)
        text = json.dumps({"pads": pads}, indent=2, sort_keys=True, ensure_ascii=False)
        atomic_write_text(self.path, text + "\n", mode=PRIVATE_FILE_MODE)
