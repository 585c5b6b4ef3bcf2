"""The runtime contract every pad backend implements (local now, remote over HTTP later)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable
from types import TracebackType
from typing import Any

from scratchpad.errors import InvalidInputError, PadError
from scratchpad.runtime import render
from scratchpad.runtime.cell import Cell, StreamItem
from scratchpad.runtime.names import validate_pad_name

DEFAULT_COMPACT_KEEP = 5


class ScratchpadRuntime(ABC):
    """A named, persistent Python environment driven like a notebook.

    ``close()`` stops the process and keeps the environment; ``cleanup()`` destroys both.
    ``execute()`` drains ``execute_streaming()``: progress/output events, then one Cell.
    """

    def __init__(self, name: str, *, compact_keep: int = DEFAULT_COMPACT_KEEP) -> None:
        self.name = validate_pad_name(name)
        self.cells: list[Cell] = []
        self.compact_keep = compact_keep

    @abstractmethod
    async def start(self) -> None:
        """Make the pad ready to run cells (create its environment, start its kernel)."""

    @abstractmethod
    async def reset(self) -> None:
        """Restart the process: variables and cells are cleared, installed packages stay."""

    @abstractmethod
    async def close(self) -> None:
        """Stop the process; keep the environment for the next start."""

    async def detach(self) -> None:
        """Let go of the pad, leaving it running where it can outlive this process (a remote
        pad); a local pad's kernel belongs to this process, so it is closed."""
        await self.close()

    @abstractmethod
    async def cancel(self) -> None:
        """Interrupt the running cell, if any (its variables are kept when the interrupt works)."""

    @abstractmethod
    async def cleanup(self) -> None:
        """Stop the process and delete the environment and everything of the pad."""

    @abstractmethod
    async def install_packages(self, packages: list[str]) -> str:
        """Install packages into the pad; returns the installer's output."""

    @abstractmethod
    def execute_streaming(
        self,
        code: str,
        *,
        description: str = "",
        estimated_time: str = "",
        estimated_seconds: float = 0.0,
    ) -> AsyncGenerator[StreamItem, None]:
        """Run ``code``; yields progress/output/display events, then exactly one Cell."""

    @property
    @abstractmethod
    def busy(self) -> bool:
        """True while a cell is running."""

    @property
    @abstractmethod
    def closed(self) -> bool:
        """True after close() or cleanup(), until start() runs again."""

    async def execute(
        self,
        code: str,
        *,
        description: str = "",
        estimated_time: str = "",
        estimated_seconds: float = 0.0,
        on_event: Callable[[StreamItem], Any] | None = None,
    ) -> Cell:
        """Run ``code`` and return its Cell (events go to ``on_event`` when given)."""
        cell: Cell | None = None
        async for item in self.execute_streaming(
            code,
            description=description,
            estimated_time=estimated_time,
            estimated_seconds=estimated_seconds,
        ):
            if isinstance(item, Cell):
                cell = item
            elif on_event is not None:
                on_event(item)
        if cell is None:
            raise PadError(f"pad {self.name!r} ended a cell without a result; run it again")
        return cell

    # -- views shared by every backend ----------------------------------------------------
    def view(self) -> str:
        return render.view(self.name, self.cells, self.compact_keep)

    def dump(self) -> str:
        return render.dump(self.name, self.cells)

    def to_ipynb(self) -> dict[str, Any]:
        return render.to_ipynb(self.name, self.cells)

    def compact(self, keep: int | None = None) -> None:
        """Fold all but the last ``keep`` cells into one summary cell (in memory)."""
        self.cells = render.compact_cells(self.cells, keep or self.compact_keep)

    async def __aenter__(self) -> ScratchpadRuntime:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def check_execute_args(code: object, description: object, estimated_seconds: object) -> None:
    """Shared validation of execute arguments; the message says what to pass instead."""
    if not isinstance(code, str):
        raise InvalidInputError(
            f"code must be a string of Python source, not {type(code).__name__}"
        )
    if not isinstance(description, str):
        raise InvalidInputError("description must be a string")
    if (
        isinstance(estimated_seconds, bool)
        or not isinstance(estimated_seconds, (int, float))
        or estimated_seconds < 0
        or estimated_seconds != estimated_seconds
    ):
        raise InvalidInputError(
            f"estimated_seconds must be a number >= 0, not {estimated_seconds!r}"
        )


RuntimeFactory = Callable[[str], ScratchpadRuntime]
"""Builds the runtime of a pad from its name; the manager's seam for backends and fakes."""
