"""Agent state: durable YAML working memory with a wake → run → sleep cycle and per-cycle
snapshots (``cycle.py`` has the six events, ``layout.py`` the files).

Imported lazily, so ``scratchpad.memory.state`` stays cheap for tools that only read a state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scratchpad._lazy import lazy_exports

if TYPE_CHECKING:
    from scratchpad.memory.config import AgentConfig, ToolsConfig, load_config
    from scratchpad.memory.cycle import CycleAgent, CycleResult
    from scratchpad.memory.dispatcher import Dispatcher, Step, parse_reply
    from scratchpad.memory.journal import CycleRecord, read_records
    from scratchpad.memory.layout import AgentPaths, init_agent
    from scratchpad.memory.lock import agent_lock
    from scratchpad.memory.models import Model, ProviderModel, ScriptedModel, model_from_spec
    from scratchpad.memory.report import AgentStatus, HistoryEntry, agent_status, cycle_history
    from scratchpad.memory.snapshots import CycleDiff, diff, reset, restore
    from scratchpad.memory.state import (
        DEFAULT_STATE,
        State,
        default_state,
        dump_state,
        load_state,
        parse_state,
        save_state,
    )

_EXPORTS = {
    "AgentConfig": "scratchpad.memory.config",
    "AgentPaths": "scratchpad.memory.layout",
    "AgentStatus": "scratchpad.memory.report",
    "CycleAgent": "scratchpad.memory.cycle",
    "CycleDiff": "scratchpad.memory.snapshots",
    "CycleRecord": "scratchpad.memory.journal",
    "CycleResult": "scratchpad.memory.cycle",
    "DEFAULT_STATE": "scratchpad.memory.state",
    "Dispatcher": "scratchpad.memory.dispatcher",
    "HistoryEntry": "scratchpad.memory.report",
    "Model": "scratchpad.memory.models",
    "ProviderModel": "scratchpad.memory.models",
    "ScriptedModel": "scratchpad.memory.models",
    "State": "scratchpad.memory.state",
    "Step": "scratchpad.memory.dispatcher",
    "ToolsConfig": "scratchpad.memory.config",
    "agent_lock": "scratchpad.memory.lock",
    "agent_status": "scratchpad.memory.report",
    "cycle_history": "scratchpad.memory.report",
    "default_state": "scratchpad.memory.state",
    "diff": "scratchpad.memory.snapshots",
    "dump_state": "scratchpad.memory.state",
    "init_agent": "scratchpad.memory.layout",
    "load_config": "scratchpad.memory.config",
    "load_state": "scratchpad.memory.state",
    "model_from_spec": "scratchpad.memory.models",
    "parse_reply": "scratchpad.memory.dispatcher",
    "parse_state": "scratchpad.memory.state",
    "read_records": "scratchpad.memory.journal",
    "reset": "scratchpad.memory.snapshots",
    "restore": "scratchpad.memory.snapshots",
    "save_state": "scratchpad.memory.state",
}

__all__ = [
    "DEFAULT_STATE",
    "AgentConfig",
    "AgentPaths",
    "AgentStatus",
    "CycleAgent",
    "CycleDiff",
    "CycleRecord",
    "CycleResult",
    "Dispatcher",
    "HistoryEntry",
    "Model",
    "ProviderModel",
    "ScriptedModel",
    "State",
    "Step",
    "ToolsConfig",
    "agent_lock",
    "agent_status",
    "cycle_history",
    "default_state",
    "diff",
    "dump_state",
    "init_agent",
    "load_config",
    "load_state",
    "model_from_spec",
    "parse_reply",
    "parse_state",
    "read_records",
    "reset",
    "restore",
    "save_state",
]


__getattr__, __dir__ = lazy_exports("scratchpad.memory", _EXPORTS, globals())
