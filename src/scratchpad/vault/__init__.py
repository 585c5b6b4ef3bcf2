"""The vault: encrypted local credentials and their injection into pads; every secret it
holds is registered with the one scrubber (``scratchpad.scrub``, a leaf of its own).

``from scratchpad.vault import Vault, KEEP`` loads the store (and ``cryptography`` only once
a key is needed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scratchpad._lazy import lazy_exports

if TYPE_CHECKING:
    from scratchpad.vault.records import KEEP as KEEP
    from scratchpad.vault.store import Vault as Vault

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
