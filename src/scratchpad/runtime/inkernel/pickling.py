"""What a pad's checkpoint may save, and how a value is pickled (kernel side, standard
library only; the serializers are given): the refusals (open files, sockets, locks,
generators, threads; dill's file-handle reconstruction, which re-opens a ``'w'`` file and
truncates it), the per-value cap that stops a pickle mid-stream, the pickler that saves the
kernel namespace's own functions so they come back bound to it, and the scrubber's key shapes
found where a pickle puts strings."""

from __future__ import annotations

import _thread
import io
import re
import sys
import types

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

MARKER = b"_create_filehandle"  # dill's file reconstruction: re-opens 'w' files, truncating them
KEY_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
# Pickle opcodes that put a string's length just before it (1 byte, 4 bytes, 8 bytes): a
# length byte that is a letter or digit does not make a key there continue a word.
SHORT_STRINGS = frozenset(b"\x8cCU")  # SHORT_BINUNICODE, SHORT_BINBYTES, SHORT_BINSTRING
LONG_STRINGS = frozenset(b"XBT")  # BINUNICODE, BINBYTES, BINSTRING
LONGER_STRINGS = frozenset(b"\x8d\x8e")  # BINUNICODE8, BINBYTES8


class Unsaveable(Exception):
    """A value that must not be pickled (its reason is what the report says)."""


class Capped(io.RawIOBase):
    """Collects a pickle's bytes and stops it mid-stream past ``cap``."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap
        self.parts: list[bytes] = []
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.size += len(data)
        if self.size > self.cap:
            raise Unsaveable(f"over the {mb(self.cap)} cap per variable")
        self.parts.append(bytes(data))
        return len(data)


def mb(size: int) -> str:
    return f"{size / (1 << 20):.0f} MB" if size >= 1 << 20 else f"{size:,} bytes"


def refusal(obj: object) -> str | None:
    """Why ``obj`` must never be pickled (None: it may be)."""
    kind = type(obj)
    if isinstance(obj, io.IOBase) and kind not in (io.BytesIO, io.StringIO):
        return "open file handle"
    if kind in (types.GeneratorType, types.AsyncGeneratorType, types.CoroutineType):
        return "generator"
    if kind is _thread.LockType or kind.__name__ in ("RLock", "_RLock"):
        return "lock"
    socket = sys.modules.get("socket")
    if socket is not None and isinstance(obj, socket.socket):
        return "open socket"
    threading = sys.modules.get("threading")
    if threading is not None and isinstance(obj, threading.Thread):
        return "thread"
    return None


def _main_function(
    code: types.CodeType,
    name: str,
    defaults: Any,
    kwdefaults: Any,
    closure: Any,
    attributes: Any,
    qualname: str,
) -> types.FunctionType:
    """A function of the kernel's namespace, rebuilt with that namespace as its globals
    (cloudpickle would give it a private copy: it would not see later globals)."""
    namespace = sys.modules["__main__"].__dict__
    function = types.FunctionType(code, namespace, name, defaults, closure)
    function.__kwdefaults__ = kwdefaults
    function.__qualname__ = qualname
    if attributes:
        function.__dict__.update(attributes)
    return function


def pickler_class(base: Any, namespace: dict[str, Any]) -> Any:
    """``base`` (cloudpickle's or dill's Pickler) refusing what must not be saved, and
    saving the namespace's own functions so they come back bound to it."""

    class Pickler(base):  # type: ignore[misc]
        def reducer_override(self, obj: object) -> Any:
            why = refusal(obj)
            if why is not None:
                raise Unsaveable(why)
            if type(obj) is types.FunctionType and obj.__globals__ is namespace:
                return _main_function, (
                    obj.__code__, obj.__name__, obj.__defaults__, obj.__kwdefaults__,
                    obj.__closure__, obj.__dict__ or None, obj.__qualname__,
                )  # fmt: skip
            parent = getattr(super(), "reducer_override", None)
            return parent(obj) if parent is not None else NotImplemented

    return Pickler


def key_shapes(shapes: Iterable[Any]) -> tuple[re.Pattern[bytes], list[bytes]] | None:
    """The scrubber's key shapes (``(literal start, pattern)`` pairs, given by the server)
    as one bytes search (no groups: the engine then skips in C where none can start), and
    their starts (None: none given)."""
    parts, starts = [], []
    for shape in shapes:
        start, pattern = (str(part).encode() for part in shape)
        parts.append(re.escape(start) + pattern)
        starts.append(start)
    return (re.compile(b"|".join(parts)), starts) if parts else None


def key_shape_in(shapes: tuple[re.Pattern[bytes], list[bytes]], data: bytes) -> str | None:
    """The start of the first key shape in a pickle (None: none), as the scrubber finds
    them: a key that continues a word is none, but the length a pickle puts before a string
    is no word."""
    search, starts = shapes
    position = 0
    while (match := search.search(data, position)) is not None:
        at = match.start()
        if (
            at == 0
            or data[at - 1] not in KEY_CHARS
            or (at >= 2 and data[at - 2] in SHORT_STRINGS)
            or (at >= 5 and data[at - 5] in LONG_STRINGS)
            or (at >= 9 and data[at - 9] in LONGER_STRINGS)
        ):
            found = match.group()
            return max((s for s in starts if found.startswith(s)), key=len).decode()
        position = at + 1
    return None
