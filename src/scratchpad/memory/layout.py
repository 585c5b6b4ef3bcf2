"""Where the files of an agent directory live, and how ``init`` lays them out.

Every other module asks :class:`AgentPaths` for a path instead of joining names itself, so
the layout is written down once::

    ROOT/RULES.md                        the system prompt ("rules") for the model
    ROOT/config.yaml                     the agent's settings (optional)
    ROOT/scratchpad/active.yaml          the live, durable state
    ROOT/scratchpad/<cycle>_before.yaml  state as read at the start of that cycle
    ROOT/scratchpad/<cycle>_after.yaml   state as left at the end of that cycle
    ROOT/logs/cycle_<cycle>.log          log of the cycle, full traceback when it failed
    ROOT/logs/cycles.jsonl               one line per finished cycle: its outcome
    ROOT/notes_archive/<cycle>.md        notes moved out of the state by the size cap
    ROOT/.lock                           held (flock) while a cycle or restore/reset runs
    ROOT/workspace/                      where the agent's pads and shell commands work
    ROOT/.scratchpad/                    the pads' home (their venvs, history, vault)

Pads and shell commands reach only ``workspace/`` of the agent directory: the rest (its
rules, config, state, snapshots, logs) is out of their reach (see ``toolbox.py``), so what
the model runs cannot change what drives it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from scratchpad.errors import AgentError
from scratchpad.fsutil import atomic_write_text
from scratchpad.memory.state import default_state, dump_state

STARTER_RULES = """\
# Rules

You are an agent that works in cycles. Each cycle you wake up with your state (goals,
current task, pending actions, completed tasks, notes), take a few steps, and go back to
sleep; the state is all you remember between cycles.

- Work on `current_task`. When it is finished, call `done` with a one-line summary: the next
  pending action becomes the current task.
- Keep `pending_actions` as a short ordered list of what to do next (update_scratchpad).
- Write down in `notes` what the next cycle needs to know; keep it short.
- Use tools when they help; their results are appended to your notes.
"""

CONFIG_TEMPLATE = """\
# Agent settings. Every key is optional; the values shown are the defaults.
# max_iterations: 10       # model calls per cycle before it ends without `done`
# notes_cap_chars: 8000    # older notes beyond this move to notes_archive/ (or observations)
# keep_last: null          # keep only the snapshots of the last N cycles (null: keep all)
# model: null              # provider:model; null: the SCRATCHPAD_MODEL setting
# archive_ttl_s: 2592000   # lifetime of notes archived in an observation store (30 days)
# tools:
#   pads: true             # offer the `scratchpad` tool (pads work in ROOT/workspace)
#   shell: false           # offer the `shell` tool (commands run confined in ROOT/workspace)
#   shell_timeout_s: 30    # longest a shell command may run
#   shell_output_cap_chars: 10000
"""


@dataclass(frozen=True, slots=True)
class AgentPaths:
    """The paths of one agent directory (nothing is created by building it)."""

    root: Path

    @classmethod
    def of(cls, root: str | Path) -> AgentPaths:
        return cls(Path(root).expanduser().resolve())

    @property
    def rules(self) -> Path:
        return self.root / "RULES.md"

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def scratch(self) -> Path:
        return self.root / "scratchpad"

    @property
    def active(self) -> Path:
        return self.scratch / "active.yaml"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def cycles_log(self) -> Path:
        return self.logs / "cycles.jsonl"

    @property
    def archive(self) -> Path:
        return self.root / "notes_archive"

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def pad_home(self) -> Path:
        return self.root / ".scratchpad"

    def before(self, cycle_id: str) -> Path:
        return self.scratch / f"{cycle_id}_before.yaml"

    def after(self, cycle_id: str) -> Path:
        return self.scratch / f"{cycle_id}_after.yaml"

    def cycle_log(self, cycle_id: str) -> Path:
        return self.logs / f"cycle_{cycle_id}.log"

    def require(self) -> AgentPaths:
        """Self, or an error saying how to create the directory."""
        if not self.root.is_dir():
            raise AgentError(
                f"{self.root} is not an agent directory; create it with "
                f"`scratchpad agent init {self.root}`"
            )
        return self


def ensure_workspace(paths: AgentPaths) -> Path:
    """The workspace of the agent's pads and shell, made when missing; AgentError when it is
    anything but a directory of its own (a symbolic link would give them what it points to)."""
    with contextlib.suppress(FileExistsError):  # a file or a dangling link: refused below
        paths.workspace.mkdir(exist_ok=True)
    if paths.workspace.is_symlink() or not paths.workspace.is_dir():
        raise AgentError(
            f"{paths.workspace} must be a directory (the agent's pads and shell work there), "
            "not a file or a symbolic link; move it away and run again"
        )
    return paths.workspace


def init_agent(root: str | Path) -> tuple[AgentPaths, list[Path]]:
    """Create the directories, a starter RULES.md, a commented config.yaml and the default
    state; files that exist are kept. The paths, and the files that were written."""
    paths = AgentPaths.of(root)
    if paths.root.exists() and not paths.root.is_dir():
        raise AgentError(f"{paths.root} is a file; give a directory for the agent")
    for directory in (paths.root, paths.scratch, paths.logs, paths.workspace):
        directory.mkdir(parents=True, exist_ok=True)
    written = []
    for path, text in (
        (paths.rules, STARTER_RULES),
        (paths.config, CONFIG_TEMPLATE),
        (paths.active, dump_state(default_state())),
    ):
        if not path.exists():
            atomic_write_text(path, text)
            written.append(path)
    return paths, written
