"""The one builder of registries of built-in tools, so every caller (the agent session, an
agent's cycle, the MCP server, a probe session) offers them the same way and in the same order.

The order is fixed: ``echo``, ``scratchpad``, ``read_observation``, ``read_image``, ``shell``,
``request_credentials`` and ``update_form``, then the caller's own tools. It decides the order
of the tools and of their system-prompt fragments the model sees, so a caller that drops a
tool does not reorder the others.
"""

from __future__ import annotations

from collections.abc import Iterable

from scratchpad.errors import InvalidInputError
from scratchpad.observations.store import ObservationStore
from scratchpad.runtime.manager import ScratchpadManager
from scratchpad.tools.base import ToolDef
from scratchpad.tools.credentials_tool import request_credentials_tool, update_form_tool
from scratchpad.tools.echo_tool import echo_tool
from scratchpad.tools.image_tool import read_image_tool
from scratchpad.tools.observation_tool import read_observation_tool
from scratchpad.tools.registry import ToolRegistry
from scratchpad.tools.scratchpad_tool import scratchpad_tool
from scratchpad.tools.shell_tool import ShellOptions, shell_tool

__all__ = ["ShellOptions", "builtin_registry"]


def builtin_registry(
    manager: ScratchpadManager | None = None,
    store: ObservationStore | None = None,
    *,
    echo: bool = False,
    images: bool = True,
    shell: ShellOptions | None = None,
    credentials: bool = False,
    extra: Iterable[ToolDef] = (),
) -> ToolRegistry:
    """A registry of the built-in tools asked for: ``echo`` when asked, ``scratchpad`` with a
    manager, ``read_observation`` with a store (the tool reads the store of its call's
    context), ``read_image`` when ``images``, ``shell`` when options are given, the credential
    form tools when ``credentials`` (for a client that shows the forms); then ``extra`` in
    order. An extra tool whose name is taken is an InvalidInputError."""
    registry = ToolRegistry()
    if echo:
        registry.register(echo_tool())
    if manager is not None:
        registry.register(scratchpad_tool(manager))
    if store is not None:
        registry.register(read_observation_tool())
    if images:
        registry.register(read_image_tool())
    if shell is not None:
        registry.register(shell_tool(shell))
    if credentials:
        registry.register(request_credentials_tool())
        registry.register(update_form_tool())
    for tool in extra:
        if not registry.register(tool):
            raise InvalidInputError(
                f"tool name {tool.name!r} is taken (registered: {', '.join(registry.names())}); "
                "give the extra tool another name, or leave out the built-in one"
            )
    return registry
