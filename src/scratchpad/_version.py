"""The package's version, read from its installed metadata: ``pyproject.toml`` is the one
place it is written. Imported on first use of ``scratchpad.__version__`` (reading metadata
costs tens of milliseconds)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("scratchpad")
except PackageNotFoundError:  # a source tree that was never installed (pip install -e .)
    __version__ = "0+unknown"
