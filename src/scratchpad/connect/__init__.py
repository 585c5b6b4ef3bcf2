"""Getting credentials without a model ever seeing them: a person fills in a form, a
headless probe tests the values in a pad of its own, and only a working set is saved.

``from scratchpad.connect import stage, run_probe, saved_submission`` (see
:mod:`scratchpad.connect.credentials`); loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scratchpad._lazy import lazy_exports

if TYPE_CHECKING:
    from scratchpad.connect.credentials import run_probe as run_probe
    from scratchpad.connect.credentials import saved_submission as saved_submission
    from scratchpad.connect.credentials import stage as stage
    from scratchpad.connect.submissions import Submission as Submission
    from scratchpad.connect.submissions import Submissions as Submissions

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
