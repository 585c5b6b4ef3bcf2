"""The tools an agent's model is offered, from its config.

``echo`` always; ``scratchpad`` (pads) unless ``tools.pads`` is false; ``read_observation``
when the agent has an observation store (archived notes live there; the model is shown it
once the agent's turn has observations, i.e. from the first step after notes were archived);
``shell`` only when ``tools.shell`` is true; no ``read_image`` (the cycle's model reads
text). A tool that is not registered cannot be called. The registry comes from
``builtin_registry``, so the order is always echo, scratchpad, read_observation, shell.

With pads off no ScratchpadManager is built from the settings (so a bad ``SCRATCHPAD_*``
pad setting does not matter); the tool context gets one that starts no pad.
"""

from __future__ import annotations

from scratchpad.config import Settings
from scratchpad.errors import AgentError
from scratchpad.memory.config import AgentConfig
from scratchpad.memory.layout import AgentPaths
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.base import ScratchpadRuntime
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools.builtin import ShellOptions, builtin_registry
from scratchpad.tools.context import ToolSessionContext
from scratchpad.tools.registry import ToolRegistry


def agent_turn_id(paths: AgentPaths) -> str:
    """The observation turn of an agent: the same every cycle, so archives stay readable."""
    return f"agent:{paths.root}"


def build_tools(
    paths: AgentPaths,
    config: AgentConfig,
    manager: ScratchpadManager | None,
    store: ObservationStore | None,
) -> tuple[ToolRegistry, ToolSessionContext]:
    """The registry and the context its tools run with; ``manager`` is needed (and only
    used) when pads are on."""
    if config.tools.pads and manager is None:
        raise AgentError("tools.pads is on: build_tools needs a ScratchpadManager")
    pads = manager if config.tools.pads else None
    registry = builtin_registry(
        pads, store, echo=True, images=False, shell=shell_options(paths, config)
    )
    context = ToolSessionContext(
        manager=pads if pads is not None else padless_manager(paths),
        store=store,
        turn_id=agent_turn_id(paths),
    )
    return registry, context


def shell_options(paths: AgentPaths, config: AgentConfig) -> ShellOptions | None:
    """The shell tool's options when ``tools.shell`` is on (commands run in the agent's
    directory), else None."""
    if not config.tools.shell:
        return None
    return ShellOptions(
        cwd=paths.root,
        timeout_s=config.tools.shell_timeout_s,
        output_cap_chars=config.tools.shell_output_cap_chars,
    )


def padless_manager(paths: AgentPaths) -> ScratchpadManager:
    """A manager for the tool context of an agent without pads: it reads no settings from
    the environment and refuses to start a pad."""
    defaults = Settings.model_construct()  # the defaults, without reading SCRATCHPAD_*
    return ScratchpadManager(paths.root, settings=defaults, runtime_factory=_no_pad)


def _no_pad(name: str) -> ScratchpadRuntime:
    raise AgentError(f"pads are off for this agent (tools.pads: false); {name!r} cannot start")
