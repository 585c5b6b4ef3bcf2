"""Provider adapters, chosen by a ``provider:model`` spec (``SCRATCHPAD_MODEL``)."""

from __future__ import annotations

from scratchpad.config import Settings
from scratchpad.errors import ConfigError
from scratchpad.llm.provider import Provider

PROVIDERS = ("anthropic", "openai", "openai-compatible")


def parse_model_spec(spec: str) -> tuple[str, str]:
    """``"anthropic:claude-x"`` → ``("anthropic", "claude-x")``, or a ConfigError."""
    provider, _, model = spec.partition(":")
    if provider not in PROVIDERS or not model:
        raise ConfigError(
            f"model {spec!r} is not 'provider:model' with provider one of "
            f"{', '.join(PROVIDERS)} (e.g. 'anthropic:claude-sonnet-4-5'); set SCRATCHPAD_MODEL"
        )
    return provider, model


def create_provider(spec: str | None = None, *, settings: Settings | None = None) -> Provider:
    """The provider for ``spec`` (default: the ``model`` setting); keys come from the usual
    environment variables (ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENAI_BASE_URL)."""
    settings = settings or Settings.load()
    provider, model = parse_model_spec(spec or settings.model)
    timeout, budget = settings.llm_timeout_s, settings.llm_retry_budget_s
    if provider == "anthropic":
        from scratchpad.llm.adapters.anthropic import AnthropicProvider

        return AnthropicProvider(model, timeout_s=timeout, retry_budget_s=budget)
    from scratchpad.llm.adapters.openai import OpenAIProvider

    compatible = provider == "openai-compatible"
    return OpenAIProvider(model, compatible=compatible, timeout_s=timeout, retry_budget_s=budget)
