"""Agent state: durable YAML working memory with a wake → run → sleep cycle and per-cycle
snapshots (``cycle.py`` has the six events, ``layout.py`` the files). The exports are what an
agent's author uses (the cycle, its setup, state, models, the dispatcher, the record of past
cycles); snapshots and the lock stay in their modules.

Imported lazily, so ``scratchpad.memory.state`` stays cheap for tools that only read a state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scratchpad._lazy import lazy_exports

if TYPE_CHECKING:
    from scratchpad.memory.config import AgentConfig as AgentConfig
    from scratchpad.memory.config import ToolsConfig as ToolsConfig
    from scratchpad.memory.config import load_config as load_config
    from scratchpad.memory.cycle import CycleAgent as CycleAgent
    from scratchpad.memory.cycle import CycleResult as CycleResult
    from scratchpad.memory.dispatcher import Dispatcher as Dispatcher
    from scratchpad.memory.dispatcher import Step as Step
    from scratchpad.memory.dispatcher import parse_reply as parse_reply
    from scratchpad.memory.journal import CycleRecord as CycleRecord
    from scratchpad.memory.journal import read_records as read_records
    from scratchpad.memory.layout import AgentPaths as AgentPaths
    from scratchpad.memory.layout import init_agent as init_agent
    from scratchpad.memory.models import Model as Model
    from scratchpad.memory.models import ProviderModel as ProviderModel
    from scratchpad.memory.models import ScriptedModel as ScriptedModel
    from scratchpad.memory.models import model_from_spec as model_from_spec
    from scratchpad.memory.report import AgentStatus as AgentStatus
    from scratchpad.memory.report import HistoryEntry as HistoryEntry
    from scratchpad.memory.report import agent_status as agent_status
    from scratchpad.memory.report import cycle_history as cycle_history
    from scratchpad.memory.state import State as State
    from scratchpad.memory.state import default_state as default_state
    from scratchpad.memory.state import load_state as load_state
    from scratchpad.memory.state import save_state as save_state

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
