"""The credential flow from Python: stage a submission, run its probe, test a saved one.

    from scratchpad.connect import stage, run_probe

    submission = stage(form_spec, {"host": "db.internal", "password": "..."})
    async for event in run_probe(submission):
        print(event["type"])

``run_probe`` yields the events of the HTTP stream (see :mod:`scratchpad.connect.flow`); the
probe's model is ``SCRATCHPAD_PROBE_MODEL`` (else ``SCRATCHPAD_MODEL``) unless a provider is
given.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from scratchpad.config import Settings
from scratchpad.connect.flow import submission_events
from scratchpad.connect.submissions import Submission, Submissions
from scratchpad.errors import ConfigError, LLMError, ModelNotConfiguredError
from scratchpad.llm.provider import Provider
from scratchpad.vault.engines import engine_form, get_engine
from scratchpad.vault.store import Vault

STAGED = Submissions()
"""This process's staged submissions (a server keeps its own)."""


def stage(
    form_spec: object,
    values: object,
    skipped: object = (),
    *,
    form_id: object = None,
    conversation_id: object = None,
    connection_name: object = None,
    submissions: Submissions | None = None,
) -> Submission:
    """Check and stage a submission (in memory only); InvalidInputError says what is wrong.
    ``connection_name``: what a success is saved as (default: the engine's next number)."""
    store = submissions if submissions is not None else STAGED
    return store.stage(
        form_spec,
        values,
        skipped,
        form_id=form_id,
        conversation_id=conversation_id,
        connection_name=connection_name,
    )


def probe_provider(settings: Settings) -> Provider:
    """The probe's model: the probe_model setting, else the model setting. Without one that
    can be used (a bad setting, no key for its provider, no SDK), ModelNotConfiguredError
    saying what to set: nothing can be tested until someone configures it."""
    from scratchpad.llm.adapters import create_provider

    spec = settings.probe_model or settings.model
    try:
        return create_provider(spec, settings=settings)
    except (ConfigError, LLMError) as exc:
        raise ModelNotConfiguredError(
            f"credentials cannot be tested here: the probe's model {spec!r} cannot be used "
            f"({exc}). Set SCRATCHPAD_PROBE_MODEL (else SCRATCHPAD_MODEL) to "
            "'provider:model' and that provider's key (ANTHROPIC_API_KEY, OPENAI_API_KEY) "
            "where the credentials are tested (a server: then restart it)"
        ) from exc


async def run_probe(
    submission: Submission,
    *,
    provider: Provider | None = None,
    vault: Vault | None = None,
    settings: Settings | None = None,
    saved: tuple[str, str] | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """The events of probing ``submission`` (saved to ``vault`` on success, unless the
    values came from ``saved``, an existing connection)."""
    settings = settings or (vault.settings if vault is not None else Settings.load())
    vault = vault or Vault(settings)
    provider = provider or probe_provider(settings)
    async for event in submission_events(
        submission, provider=provider, vault=vault, settings=settings, saved=saved
    ):
        yield event


def saved_submission(
    vault: Vault, engine: str, name: str, *, submissions: Submissions | None = None
) -> Submission:
    """A submission of a stored connection's values, to test it again: the engine's form
    where the engine is known, else a form of the record's own fields."""
    record = vault.record(engine, name)
    values = {k: v for k, v in vault.load(engine, name).items() if not k.startswith("_")}
    known = {f["name"]: f for f in engine_form(engine)["fields"]} if get_engine(engine) else {}
    secret = set(record["secure_keys"])
    fields = [known.get(f) or {"name": f, "type": "password" if f in secret else "text"}
              for f in values]  # fmt: skip
    form = {"engine": engine, "title": f"Test {engine}/{name}", "fields": fields}
    return stage(form, values, submissions=submissions)
