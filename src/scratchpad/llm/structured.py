"""Structured output: a pydantic model filled by a forced tool call, validated."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, get_args, get_origin

from pydantic import BaseModel, ValidationError

from scratchpad.errors import StructuredOutputError
from scratchpad.llm.messages import Message, ToolSpec
from scratchpad.llm.provider import Provider

M = TypeVar("M", bound=BaseModel)
LIST_FIELD = "items"


def structured_tool(target: type[BaseModel] | Any) -> tuple[ToolSpec, type[BaseModel], bool]:
    """The tool to force for ``Model`` or ``list[Model]``: (spec, model, is_list)."""
    is_list = get_origin(target) is list
    model = get_args(target)[0] if is_list else target
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError("generate_object needs a pydantic model class or list[Model]")
    schema = model.model_json_schema()
    if is_list:
        definitions = schema.pop("$defs", None)
        schema = {
            "type": "object",
            "properties": {LIST_FIELD: {"type": "array", "items": schema}},
            "required": [LIST_FIELD],
        }
        if definitions:
            schema["$defs"] = definitions
    name = f"submit_{model.__name__.lower()}{'_list' if is_list else ''}"
    description = f"Return the answer as {'a list of ' if is_list else ''}{model.__name__}."
    return ToolSpec(name, description, schema), model, is_list


async def generate_object(
    provider: Provider,
    target: type[M] | Any,
    *,
    system: str,
    messages: Sequence[Message],
    max_tokens: int = 4096,
) -> Any:
    """An instance of ``target`` (a pydantic model, or ``list[Model]``) from the model.

    Raises StructuredOutputError when the call is missing, cut off, repaired or invalid.
    """
    spec, model, is_list = structured_tool(target)
    response = await provider.complete(
        system=system,
        messages=messages,
        tools=[spec],
        tool_choice={"type": "tool", "name": spec.name},
        max_tokens=max_tokens,
    )
    call = next((c for c in response.tool_calls if c.name == spec.name), None)
    if call is None:
        raise StructuredOutputError(
            f"the model did not call {spec.name} (it replied: {response.text[:200]!r})"
        )
    damage = _damage(call.parse_error, call.repaired, response.stop_reason)
    if damage:
        raise StructuredOutputError(
            f"the {spec.name} call is not trustworthy: {damage}; "
            "raise max_tokens or simplify the request"
        )
    try:
        if is_list:
            items = call.input.get(LIST_FIELD)
            if not isinstance(items, list):
                raise StructuredOutputError(f"the {spec.name} call has no '{LIST_FIELD}' list")
            return [model.model_validate(item) for item in items]
        return model.model_validate(call.input)
    except ValidationError as exc:
        raise StructuredOutputError(
            f"the model's {model.__name__} does not validate: {exc.error_count()} errors; "
            f"{exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}"
        ) from exc


def _damage(parse_error: str | None, repaired: bool, stop_reason: str) -> str:
    if parse_error:
        return parse_error
    if repaired:
        return "its arguments were cut off and had to be repaired"
    if stop_reason == "max_tokens":
        return "the reply stopped at max_tokens"
    return ""
