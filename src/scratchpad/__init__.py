"""Scratchpad: working memory for LLM agents.

The public API, imported lazily so that ``import scratchpad`` stays cheap (the CLI and the
kernel's helpers should not pay for modules they do not use). The imports below are the one
list of it: ``__all__`` and the lazy loader are derived from them (see ``_lazy.py``). Every
class of the error tree (``scratchpad.errors``) is here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scratchpad._lazy import lazy_exports

if TYPE_CHECKING:
    from scratchpad._version import __version__ as __version__
    from scratchpad.agent.session import Session as Session
    from scratchpad.config import Settings as Settings
    from scratchpad.errors import AccessError as AccessError
    from scratchpad.errors import AgentError as AgentError
    from scratchpad.errors import AgentLockedError as AgentLockedError
    from scratchpad.errors import AgentStateError as AgentStateError
    from scratchpad.errors import CellAcceptingError as CellAcceptingError
    from scratchpad.errors import CellIdReusedError as CellIdReusedError
    from scratchpad.errors import ClusterError as ClusterError
    from scratchpad.errors import ConfigError as ConfigError
    from scratchpad.errors import DiskFullError as DiskFullError
    from scratchpad.errors import FileTooLargeError as FileTooLargeError
    from scratchpad.errors import ForbiddenError as ForbiddenError
    from scratchpad.errors import FormClosedError as FormClosedError
    from scratchpad.errors import FormNotFoundError as FormNotFoundError
    from scratchpad.errors import InstallError as InstallError
    from scratchpad.errors import InvalidInputError as InvalidInputError
    from scratchpad.errors import InvalidPadNameError as InvalidPadNameError
    from scratchpad.errors import KernelStartError as KernelStartError
    from scratchpad.errors import LLMAuthError as LLMAuthError
    from scratchpad.errors import LLMContextOverflowError as LLMContextOverflowError
    from scratchpad.errors import LLMError as LLMError
    from scratchpad.errors import LLMModelUnavailableError as LLMModelUnavailableError
    from scratchpad.errors import LLMNoReplyError as LLMNoReplyError
    from scratchpad.errors import LLMRateLimitError as LLMRateLimitError
    from scratchpad.errors import LLMTransientError as LLMTransientError
    from scratchpad.errors import ModelNotConfiguredError as ModelNotConfiguredError
    from scratchpad.errors import ObservationError as ObservationError
    from scratchpad.errors import ObservationNotFoundError as ObservationNotFoundError
    from scratchpad.errors import PadAsleepError as PadAsleepError
    from scratchpad.errors import PadBusyError as PadBusyError
    from scratchpad.errors import PadClosedError as PadClosedError
    from scratchpad.errors import PadError as PadError
    from scratchpad.errors import PadLimitError as PadLimitError
    from scratchpad.errors import PadNotFoundError as PadNotFoundError
    from scratchpad.errors import ReplyError as ReplyError
    from scratchpad.errors import SandboxError as SandboxError
    from scratchpad.errors import ScratchpadError as ScratchpadError
    from scratchpad.errors import StructuredOutputError as StructuredOutputError
    from scratchpad.errors import SubmissionNotFoundError as SubmissionNotFoundError
    from scratchpad.errors import UnauthorizedError as UnauthorizedError
    from scratchpad.errors import VaultError as VaultError
    from scratchpad.errors import VaultNotFoundError as VaultNotFoundError
    from scratchpad.errors import VaultRecordError as VaultRecordError
    from scratchpad.errors import VenvError as VenvError
    from scratchpad.errors import WorkspaceConflictError as WorkspaceConflictError
    from scratchpad.errors import WorkspaceError as WorkspaceError
    from scratchpad.errors import WorkspaceFileNotFoundError as WorkspaceFileNotFoundError
    from scratchpad.llm.scripted import ScriptedProvider as ScriptedProvider
    from scratchpad.observations.store import ObservationStore as ObservationStore
    from scratchpad.runtime.base import ScratchpadRuntime as ScratchpadRuntime
    from scratchpad.runtime.cell import Cell as Cell
    from scratchpad.runtime.cell import DisplayEvent as DisplayEvent
    from scratchpad.runtime.cell import OutputEvent as OutputEvent
    from scratchpad.runtime.cell import ProgressEvent as ProgressEvent
    from scratchpad.runtime.local import LocalRuntime as LocalRuntime
    from scratchpad.runtime.manager import ScratchpadManager as ScratchpadManager
    from scratchpad.runtime.remote import RemoteRuntime as RemoteRuntime
    from scratchpad.vault.store import Vault as Vault

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
