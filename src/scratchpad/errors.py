"""The one error tree of Scratchpad.

Errors in user code are data (a Cell with status "error"); only infrastructure failures raise,
always as a subclass of ScratchpadError whose message says what to do::

    ScratchpadError
    ├── ConfigError              settings or environment variables are invalid
    ├── InvalidInputError        a caller passed a bad argument (name, code, package spec, ...)
    │   └── InvalidPadNameError  a pad name does not match the allowed pattern
    ├── PadNotFoundError         no pad with that name exists
    ├── LLMError                 a language-model call failed
    │   ├── LLMAuthError             the API key is missing or was refused
    │   ├── LLMRateLimitError        the provider is rate-limiting (retried within a budget)
    │   ├── LLMTransientError        a temporary failure outlasted the retries
    │   ├── LLMContextOverflowError  the request does not fit the model's context window
    │   ├── LLMModelUnavailableError the model is unknown or not served
    │   └── StructuredOutputError    the model did not return a valid object
    ├── ObservationError         the observation store could not do what was asked
    │   └── ObservationNotFoundError  unknown id, expired, or another turn's observation
    ├── PadError                 a pad's machinery failed
    │   ├── PadClosedError       the pad was closed or cleaned up and cannot run cells
    │   ├── VenvError            the pad's virtualenv could not be created or repaired
    │   ├── KernelStartError     the kernel process did not come up
    │   └── InstallError         installing packages into the pad failed or timed out
    └── AgentError               an agent directory cannot be used as asked (missing, no cycle)
        ├── AgentStateError      the agent's state file is not valid YAML or has a wrong type
        └── AgentLockedError     another cycle holds the agent directory's lock
"""

from __future__ import annotations


class ScratchpadError(Exception):
    """Base of every error Scratchpad raises on purpose."""


class ConfigError(ScratchpadError):
    """Settings or environment variables are invalid."""


class InvalidInputError(ScratchpadError, ValueError):
    """A caller passed an argument that cannot be used."""


class InvalidPadNameError(InvalidInputError):
    """A pad name does not match the allowed pattern."""


class PadNotFoundError(ScratchpadError, KeyError):
    """No pad with that name exists."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else "pad not found"


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


class StructuredOutputError(LLMError):
    """The model did not return a valid object for a structured-output request."""


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


class VenvError(PadError):
    """The pad's virtualenv could not be created or repaired."""


class KernelStartError(PadError):
    """The kernel process did not come up."""


class InstallError(PadError):
    """Installing packages into the pad failed or timed out."""


class AgentError(ScratchpadError):
    """An agent directory cannot be used as asked (not initialised, unknown cycle)."""


class AgentStateError(AgentError):
    """The agent's state file is not valid YAML or one of its keys has the wrong type."""


class AgentLockedError(AgentError):
    """Another cycle holds the agent directory's lock."""
