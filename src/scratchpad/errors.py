"""The one error tree of Scratchpad.

Errors in user code are data (a Cell with status "error"); only infrastructure failures raise,
always as a subclass of ScratchpadError whose message says what to do::

    ScratchpadError
    ├── ConfigError              settings or environment variables are invalid
    │   └── ModelNotConfiguredError  no usable model for what was asked (model setting, key)
    ├── InvalidInputError        a caller passed a bad argument (name, code, package spec, ...)
    │   ├── InvalidPadNameError  a pad name does not match the allowed pattern
    │   └── CellIdReusedError    a cell id already names a cell with another payload (422)
    ├── PadNotFoundError         no pad with that name exists
    ├── AccessError              a server refused the request's credentials
    │   ├── UnauthorizedError    no key, a wrong key, no live browser session (401)
    │   └── ForbiddenError       known credentials that may not do this (403)
    ├── LLMError                 a language-model call failed
    │   ├── LLMAuthError             the API key is missing or was refused
    │   ├── LLMRateLimitError        the provider is rate-limiting (retried within a budget)
    │   ├── LLMTransientError        a temporary failure outlasted the retries
    │   ├── LLMContextOverflowError  the request does not fit the model's context window
    │   ├── LLMModelUnavailableError the model is unknown or not served
    │   ├── LLMNoReplyError          the provider ended without a reply
    │   └── StructuredOutputError    the model did not return a valid object
    ├── DiskFullError            a write found no space (or no quota) left on its disk (507)
    ├── ObservationError         the observation store could not do what was asked
    │   └── ObservationNotFoundError  unknown id, expired, or another turn's observation
    ├── PadError                 a pad's machinery failed
    │   ├── PadClosedError       the pad was closed or cleaned up and cannot run cells
    │   │   └── PadAsleepError   a Ray pad's actor went to sleep: its caller makes a new one
    │   ├── VenvError            the pad's virtualenv could not be created or repaired
    │   ├── KernelStartError     the kernel process did not come up
    │   ├── ClusterError         the Ray cluster cannot be reached, or lost the pad's node
    │   ├── SandboxError         the pad cannot be sandboxed and SCRATCHPAD_SANDBOX=require
    │   ├── PadLimitError        the pad is over one of its limits (its files past its disk)
    │   ├── CellAcceptingError   a cell of that id is still being accepted: retry (409)
    │   ├── PadBusyError         a cell runs or waits: what was asked needs the pad idle (409)
    │   └── InstallError         installing packages into the pad failed or timed out
    ├── VaultError               the vault cannot do what was asked (key, file, record)
    │   ├── VaultNotFoundError   no connection with that engine and name
    │   ├── VaultRecordError     one stored record is corrupt or cannot be decrypted
    │   ├── SubmissionNotFoundError  no staged credential submission with that id (or expired)
    │   ├── FormNotFoundError    no pending form with that id (unknown, long ended, restarted)
    │   └── FormClosedError      the pending form has ended and takes no more submissions
    ├── WorkspaceError           a file of a pad's workspace cannot be used as asked
    │   ├── WorkspaceFileNotFoundError  nothing at that path of the workspace
    │   ├── WorkspaceConflictError      the path holds the other kind (a directory, a file)
    │   └── FileTooLargeError           an upload is over SCRATCHPAD_MAX_UPLOAD_BYTES
    └── AgentError               an agent directory cannot be used as asked (missing, no cycle)
        ├── AgentStateError      the agent's state file is not valid YAML or has a wrong type
        ├── AgentLockedError     another cycle holds the agent directory's lock
        └── ReplyError           a model's reply to an agent step is not the JSON asked for

Over HTTP an error travels as ``{"error": message, "type": class name}`` with the status of
:data:`HTTP_STATUS`; :func:`error_from_http` turns it back into the same class on the client
(by its name; by the status alone from a server that sends none). The status says whose move
it is: 4xx the request's (400 bad input, 401/403 credentials, 404 nothing there, 409 a state
that changed, 413 too large), 502 a model provider's, 503 the server's setup (no model
configured; a pad's virtualenv, kernel or sandbox cannot be brought up here: its Python, its
disk's permissions, its resources, its cluster — nothing is wrong with the request, and it
works once the message's remedy is applied), 507 a full disk, and 500 only what nobody foresaw.
"""

from __future__ import annotations

import errno
from typing import Any


class ScratchpadError(Exception):
    """Base of every error Scratchpad raises on purpose."""


class ConfigError(ScratchpadError):
    """Settings or environment variables are invalid."""


class ModelNotConfiguredError(ConfigError):
    """What was asked needs a language model, and none usable is configured (its setting,
    its provider's key or SDK): the message names what to set."""


class InvalidInputError(ScratchpadError, ValueError):
    """A caller passed an argument that cannot be used."""


class InvalidPadNameError(InvalidInputError):
    """A pad name does not match the allowed pattern."""


class CellIdReusedError(InvalidInputError):
    """A cell id (an idempotency key) already names a cell whose payload differs."""


class PadNotFoundError(ScratchpadError, KeyError):
    """No pad with that name exists."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else "pad not found"


class AccessError(ScratchpadError):
    """A server refused the credentials a request came with (or their lack)."""


class UnauthorizedError(AccessError):
    """No key, a wrong key, or no live browser session: send the server's key."""


class ForbiddenError(AccessError):
    """The credentials are known but may not do this (a browser session from another site,
    a form's session outside its form, a Host that is not the server's)."""


class LLMError(ScratchpadError):
    """A language-model call failed."""


class LLMAuthError(LLMError):
    """The API key is missing or was refused."""


class LLMRateLimitError(LLMError):
    """The provider is rate-limiting; the call may succeed later."""


class LLMTransientError(LLMError):
    """A temporary failure (network, 5xx, overloaded) outlasted the retries."""


class LLMContextOverflowError(LLMError):
    """The request does not fit the model's context window."""


class LLMModelUnavailableError(LLMError):
    """The model is unknown or not served by this provider."""


class LLMNoReplyError(LLMError):
    """The provider ended a response without any reply (no text, no tool call)."""


class StructuredOutputError(LLMError):
    """The model did not return a valid object for a structured-output request."""


class DiskFullError(ScratchpadError, OSError):
    """A write failed for lack of space (or of quota) on a disk: nothing half-written stays,
    and the same call works once space is freed. An ``OSError`` too (``errno`` ENOSPC or
    EDQUOT), so code that handles a failed write still handles it; made by
    :func:`scratchpad.fsutil.disk_full`, whose message names the directory ("the disk of
    <home> is full")."""

    def __init__(self, message: str, code: int = errno.ENOSPC) -> None:
        super().__init__(code, message)

    def __str__(self) -> str:
        return str(self.strerror)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.strerror, self.errno)


class ObservationError(ScratchpadError):
    """The observation store could not do what was asked."""


class ObservationNotFoundError(ObservationError, KeyError):
    """The observation id is unknown, expired, or belongs to another turn."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else "observation not found"


class PadError(ScratchpadError):
    """A pad's machinery (venv, kernel, installer) failed."""


class PadClosedError(PadError):
    """The pad was closed or cleaned up and cannot run cells."""


class PadAsleepError(PadClosedError):
    """A Ray pad's actor fell asleep and is leaving: what was asked never reached the pad
    (the server makes the actor again and asks it there)."""


class VenvError(PadError):
    """The pad's virtualenv could not be created or repaired."""


class ClusterError(PadError):
    """The Ray cluster the pads run on cannot be reached, or lost the node a pad ran on
    (its next use starts it on a live node)."""


class KernelStartError(PadError):
    """The kernel process did not come up."""


class SandboxError(PadError):
    """The pad cannot be sandboxed here and SCRATCHPAD_SANDBOX=require refuses it."""


class PadLimitError(PadError):
    """The pad is over one of its limits; the message says which and what to do."""


class CellAcceptingError(PadError):
    """A submit of the same cell id is still being accepted (its pad starting): ask again
    in a moment; it answers the cell then."""


class PadBusyError(PadError):
    """A cell of the pad runs or waits, and what was asked (a revert) needs it idle."""


class VaultError(ScratchpadError):
    """The vault cannot do what was asked (no key, unwritable directory, bad input)."""


class VaultNotFoundError(VaultError, KeyError):
    """No connection with that engine and name."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else "connection not found"


class VaultRecordError(VaultError):
    """One stored record is corrupt or cannot be decrypted with this key."""


class SubmissionNotFoundError(VaultError, KeyError):
    """No staged credential submission with that id (unknown, expired, or the server restarted)."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else "submission not found"


class WorkspaceError(ScratchpadError):
    """A file of a pad's workspace cannot be listed, read, written or deleted as asked."""


class WorkspaceFileNotFoundError(WorkspaceError):
    """Nothing (or nothing served) at that path of the workspace."""


class WorkspaceConflictError(WorkspaceError):
    """The path holds the other kind: a directory where a file goes, a directory not empty."""


class FileTooLargeError(WorkspaceError):
    """An upload is larger than SCRATCHPAD_MAX_UPLOAD_BYTES."""


class FormNotFoundError(VaultError, KeyError):
    """No pending form with that id (unknown, ended long ago, or the server restarted)."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else "form not found"


class FormClosedError(VaultError):
    """The pending form has ended (completed, declined, expired): no more submissions."""


class InstallError(PadError):
    """Installing packages into the pad failed or timed out."""

    def __init__(self, message: str, *, exit_code: int | None = None, output: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code  # None when it timed out (or never ran)
        self.output = output


class AgentError(ScratchpadError):
    """An agent directory cannot be used as asked (not initialised, unknown cycle)."""


class AgentStateError(AgentError):
    """The agent's state file is not valid YAML or one of its keys has the wrong type."""


class AgentLockedError(AgentError):
    """Another cycle holds the agent directory's lock."""


class ReplyError(AgentError, ValueError):
    """A model's reply to an agent step is not the JSON object asked for."""


HTTP_STATUS: dict[type[ScratchpadError], int] = {
    InvalidInputError: 400,
    CellIdReusedError: 422,
    UnauthorizedError: 401,
    ForbiddenError: 403,
    AccessError: 403,
    PadNotFoundError: 404,
    VaultNotFoundError: 404,
    SubmissionNotFoundError: 404,
    FormNotFoundError: 404,
    FormClosedError: 409,
    ObservationNotFoundError: 404,
    WorkspaceFileNotFoundError: 404,
    WorkspaceConflictError: 409,
    FileTooLargeError: 413,
    WorkspaceError: 400,
    PadClosedError: 409,
    PadLimitError: 507,
    CellAcceptingError: 409,
    PadBusyError: 409,
    AgentLockedError: 409,
    DiskFullError: 507,
    KernelStartError: 503,
    ClusterError: 503,
    VenvError: 503,
    SandboxError: 503,
    ModelNotConfiguredError: 503,
    LLMError: 502,
    ScratchpadError: 500,
}
"""The HTTP status of each error class (the closest ancestor listed decides)."""

BY_STATUS: dict[int, type[ScratchpadError]] = {
    400: InvalidInputError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: PadNotFoundError,
    409: PadClosedError,
    413: FileTooLargeError,
    507: DiskFullError,
}
"""The class of an error answer without a class name (a proxy's, another implementation's);
any other status is a :class:`PadError`."""


def http_status(exc: ScratchpadError) -> int:
    for cls in type(exc).__mro__:
        if cls in HTTP_STATUS:
            return HTTP_STATUS[cls]
    return 500


def error_classes() -> dict[str, type[ScratchpadError]]:
    """Every class of the tree by name."""
    found: dict[str, type[ScratchpadError]] = {}
    pending: list[type[ScratchpadError]] = [ScratchpadError]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


def error_from_http(status: int, type_name: str | None, message: str) -> ScratchpadError:
    """The error a server answered (its class by name, else by status), for a client."""
    cls = error_classes().get(type_name or "")
    if cls is None:
        cls = BY_STATUS.get(status, PadError)
    return cls(message)
