"""A matplotlib backend for pads (``MPLBACKEND=module://_scratchpad_mpl_backend``).

Figures render with Agg; ``plt.show()`` sends them to the cell as image/png outputs instead of
opening a window. Loaded inside the kernel only when a cell imports matplotlib.
"""

from __future__ import annotations

import _scratchpad_helpers
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase


def show(*args: object, **kwargs: object) -> None:
    """Capture the open figures as the cell's outputs (a notebook's inline backend)."""
    _scratchpad_helpers.capture_figures()
