"""``logging`` inside a pad: records at INFO and above, from any logger, go to the running
cell's logs (a ``log`` frame each), as in Anton's pads.

Loaded in the kernel (as ``_scratchpad_cell_logs``) when a cell first imports ``logging``:
the worker's import hook asks :func:`routed_spec` for logging's spec, whose loader routes the
records once the module is loaded. ``logging.basicConfig`` keeps working as without us.
"""

from __future__ import annotations

import sys
from typing import Any

FORMAT = "%(levelname)s %(name)s: %(message)s"


def routed_spec(name: str, path: object, target: object) -> Any:
    """The spec the other finders give ``name``, its loader wrapped to route the records."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(name, path, target) if find is not None else None
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenRoute(spec.loader)
            return spec
    return None


class _ThenRoute:
    """A loader that loads as the one it wraps, then calls :func:`route_logging`."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, ...: the real loader's
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        route_logging(module)


def route_logging(logging: Any) -> None:
    """Add the cell's handler to the root logger (at INFO unless set lower), once."""
    root = logging.getLogger()
    if any(getattr(h, "scratchpad_cell_logs", False) for h in root.handlers):
        return  # logging was reloaded: it is routed already

    class CellLogs(logging.Handler):  # type: ignore[misc]
        scratchpad_cell_logs = True

        def emit(self, record: Any) -> None:
            try:
                text = self.format(record)
            except Exception:
                self.handleError(record)
                return
            send_log(text)

    handler = CellLogs(logging.INFO)
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
    if root.level > logging.INFO:
        root.setLevel(logging.INFO)
    configure = logging.basicConfig

    def basicConfig(**kwargs: Any) -> None:
        root.removeHandler(handler)  # else it would find a handler there and do nothing
        try:
            configure(**kwargs)
        finally:
            root.addHandler(handler)

    basicConfig.__doc__ = configure.__doc__
    logging.basicConfig = basicConfig


def send_log(text: str) -> None:
    """One log line of the running cell (none between cells: no cell would own it)."""
    worker = sys.modules.get("_scratchpad_kernel")
    kernel = getattr(worker, "KERNEL", None)
    if kernel is not None and kernel.busy:
        message = worker.cut_text(text, worker.MESSAGE_CAP)  # type: ignore[union-attr]
        kernel.send({"type": "log", "id": kernel.cell_id, "message": message})
