"""The tools an agent's model is offered, from its config, and where what they run may reach.

``echo`` always; ``scratchpad`` (pads) unless ``tools.pads`` is false; ``read_observation``
when the agent has an observation store (archived notes live there; the model is shown it
once the agent's turn has observations, i.e. from the first step after notes were archived);
``shell`` only when ``tools.shell`` is true; no ``read_image`` (the cycle's model reads
text). A tool that is not registered cannot be called. The registry comes from
``builtin_registry``, so the order is always echo, scratchpad, read_observation, shell.

What the model runs cannot change what drives it: the agent's pads (their home
``ROOT/.scratchpad``) and its shell commands work in ``ROOT/workspace`` and are confined like
every pad, with the agent directory and the person's own Scratchpad home as *guarded*
directories (``sandboxing.PadPaths``): hidden but for the workspace where mount namespaces
work, else unreadable and unwritable under Landlock. Rules, config, state, snapshots and
logs are out of their reach by construction.

With pads off no ScratchpadManager is built from the settings (so a bad ``SCRATCHPAD_*``
pad setting does not matter unless the shell is on); the tool context gets one that starts
no pad.
"""

from __future__ import annotations

from pathlib import Path

from scratchpad.config import Settings
from scratchpad.errors import AgentError
from scratchpad.memory.config import AgentConfig
from scratchpad.memory.layout import AgentPaths
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.base import ScratchpadRuntime
from scratchpad.runtime.manager import ScratchpadManager, backend_for
from scratchpad.tools.builtin import ShellOptions, builtin_registry
from scratchpad.tools.context import ToolSessionContext
from scratchpad.tools.registry import ToolRegistry
from scratchpad.vault.sources import register_process_secrets


def agent_turn_id(paths: AgentPaths) -> str:
    """The observation turn of an agent: the same every cycle, so archives stay readable."""
    return f"agent:{paths.root}"


def build_tools(
    paths: AgentPaths,
    config: AgentConfig,
    manager: ScratchpadManager | None,
    store: ObservationStore | None,
    settings: Settings | None = None,
) -> tuple[ToolRegistry, ToolSessionContext]:
    """The registry and the context its tools run with; ``manager`` is needed (and only
    used) when pads are on, ``settings`` (the person's) when the shell is on."""
    if config.tools.pads and manager is None:
        raise AgentError("tools.pads is on: build_tools needs a ScratchpadManager")
    if config.tools.shell and settings is None:
        raise AgentError("tools.shell is on: build_tools needs the settings")
    pads = manager if config.tools.pads else None
    shell = shell_options(paths, config, settings) if settings is not None else None
    registry = builtin_registry(pads, store, echo=True, images=False, shell=shell)
    context = ToolSessionContext(
        manager=pads if pads is not None else padless_manager(paths),
        store=store,
        turn_id=agent_turn_id(paths),
    )
    return registry, context


def guarded(paths: AgentPaths, settings: Settings) -> tuple[Path, ...]:
    """What the agent's pads and shell must not reach beside their own home: the agent
    directory (all but its workspace) and the person's Scratchpad home (``settings.home``)."""
    return (paths.root, settings.home)


def agent_manager(paths: AgentPaths, settings: Settings) -> ScratchpadManager:
    """The agent's pads: home ``ROOT/.scratchpad``, working in ``ROOT/workspace``, the rest
    of the agent directory and the person's home guarded (remote pads run on their server,
    confined by it). ``settings``: the person's; the scrubber learns the keys kept in both
    homes."""
    register_process_secrets(settings)
    pads = settings.with_home(paths.pad_home)
    manager: ScratchpadManager

    def secrets(name: str) -> dict[str, str]:  # the manager's vault, once it exists
        return manager.pad_secret_env(name)

    backend = backend_for(pads, paths.workspace, secrets, guarded=guarded(paths, settings))
    manager = ScratchpadManager(settings=pads, backend=backend)
    return manager


def shell_options(
    paths: AgentPaths, config: AgentConfig, settings: Settings
) -> ShellOptions | None:
    """The shell tool's options when ``tools.shell`` is on (commands run confined like the
    agent's pads, in ``ROOT/workspace``), else None."""
    if not config.tools.shell:
        return None
    pads = settings.with_home(paths.pad_home)
    register_process_secrets(settings)
    register_process_secrets(pads)
    return ShellOptions(
        workspace=paths.workspace,
        settings=pads,
        guarded=guarded(paths, settings),
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
