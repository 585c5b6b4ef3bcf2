"""Provider adapters, chosen by a ``provider:model`` spec (``SCRATCHPAD_MODEL``), or
``scripted:FILE``: a ScriptedProvider playing back a JSON file (tests and demos)."""

from __future__ import annotations

import os
from dataclasses import fields
from typing import TYPE_CHECKING

from scratchpad.config import Settings
from scratchpad.errors import ConfigError, InvalidInputError
from scratchpad.llm.provider import Provider
from scratchpad.llm.scripted import ScriptedProvider
from scratchpad.text import find_control

if TYPE_CHECKING:
    from scratchpad.runtime.base import PadLLM

PROVIDERS = ("anthropic", "openai", "openai-compatible")
SCRIPTED = "scripted"
KEY_VARIABLES = {
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "openai-compatible": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
}


def parse_model_spec(spec: str) -> tuple[str, str]:
    """``"anthropic:claude-x"`` → ``("anthropic", "claude-x")``, ``"scripted:FILE"`` →
    ``("scripted", "FILE")``, or a ConfigError."""
    provider, _, model = spec.partition(":")
    if provider not in (*PROVIDERS, SCRIPTED) or not model:
        raise ConfigError(
            f"model {spec!r} is not 'provider:model' with provider one of "
            f"{', '.join(PROVIDERS)} (e.g. 'anthropic:claude-sonnet-4-5'), nor "
            "'scripted:FILE' (a JSON script); set SCRATCHPAD_MODEL"
        )
    return provider, model


def create_provider(spec: str | None = None, *, settings: Settings | None = None) -> Provider:
    """The provider for ``spec`` (default: the ``model`` setting); keys come from the usual
    environment variables (ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENAI_BASE_URL). A
    ``scripted:FILE`` spec reads its file on every call, so each provider starts the script
    over."""
    settings = settings or Settings.load()
    provider, model = parse_model_spec(spec or settings.model)
    if provider == SCRIPTED:
        return ScriptedProvider.from_file(model)
    timeout, budget = settings.llm_timeout_s, settings.llm_retry_budget_s
    if provider == "anthropic":
        from scratchpad.llm.adapters.anthropic import AnthropicProvider

        return AnthropicProvider(model, timeout_s=timeout, retry_budget_s=budget)
    from scratchpad.llm.adapters.openai import OpenAIProvider

    compatible = provider == "openai-compatible"
    return OpenAIProvider(model, compatible=compatible, timeout_s=timeout, retry_budget_s=budget)


def key_variable(provider: str) -> str:
    """The environment variable that holds ``provider``'s API key."""
    return KEY_VARIABLES[provider][0]


def pad_llm_environment(llm: PadLLM) -> dict[str, str]:
    """The environment variables that make ``get_llm()`` in a pad use ``llm`` (empty key and
    URL fields take the server's own; the pad inherits nothing else)."""
    for field in fields(llm):
        value = getattr(llm, field.name)
        if not isinstance(value, str) or find_control(value) is not None:
            raise InvalidInputError(
                f"coding_{field.name} must be text without control characters, not {value!r}"
            )
    if not llm.provider:
        return {}
    if llm.provider not in PROVIDERS:
        raise InvalidInputError(
            f"coding_provider {llm.provider!r} is not one of {', '.join(PROVIDERS)}"
        )
    key_variable, url_variable = KEY_VARIABLES[llm.provider]
    env: dict[str, str] = {}
    if llm.model:
        env["SCRATCHPAD_MODEL"] = f"{llm.provider}:{llm.model}"
    # Pads do not inherit the server's environment: empty fields take the server's values.
    key = llm.api_key or os.environ.get(key_variable, "")
    base_url = llm.base_url or os.environ.get(url_variable, "")
    if key:
        env[key_variable] = key
    if base_url:
        env[url_variable] = base_url
    return env
