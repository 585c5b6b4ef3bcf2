"""The tools an agent's model is offered, from its config.

``echo`` always; ``scratchpad`` (pads) unless ``tools.pads`` is false; ``read_observation``
when the agent has an observation store (archived notes live there); ``shell`` only when
``tools.shell`` is true. A tool that is not registered cannot be called at all.
"""

from __future__ import annotations

from scratchpad.memory.config import AgentConfig
from scratchpad.memory.layout import AgentPaths
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools.context import ToolSessionContext
from scratchpad.tools.echo_tool import echo_tool
from scratchpad.tools.observation_tool import read_observation_tool
from scratchpad.tools.registry import ToolRegistry
from scratchpad.tools.scratchpad_tool import scratchpad_tool
from scratchpad.tools.shell_tool import shell_tool


def agent_turn_id(paths: AgentPaths) -> str:
    """The observation turn of an agent: the same every cycle, so archives stay readable."""
    return f"agent:{paths.root}"


def build_tools(
    paths: AgentPaths,
    config: AgentConfig,
    manager: ScratchpadManager,
    store: ObservationStore | None,
) -> tuple[ToolRegistry, ToolSessionContext]:
    """The registry and the context its tools run with."""
    registry = ToolRegistry([echo_tool()])
    if config.tools.pads:
        registry.register(scratchpad_tool(manager))
    if store is not None:
        registry.register(read_observation_tool())
    if config.tools.shell:
        registry.register(
            shell_tool(
                cwd=paths.root,
                timeout_s=config.tools.shell_timeout_s,
                output_cap_chars=config.tools.shell_output_cap_chars,
            )
        )
    context = ToolSessionContext(manager=manager, store=store, turn_id=agent_turn_id(paths))
    return registry, context
