"""Typed answers onto the wire, one way for every edge: a pydantic model becomes the JSON-ready
data clients have always read (:func:`wire`), and a model is built without validation where
that would cost (:func:`made`: a frame per output piece, a pad's many-MB cells, the pad list).

Keys come in declaration order; a field left unset whose default is None is left out (never
null); every other value passes as it is (no coercion: an ``int`` duration stays ``1``), nested
models (and lists of them) in turn. The tests validate what :func:`wire` gives against the
models. A leaf: pydantic only.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar, get_args

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
_set = object.__setattr__  # what model_construct sets, on a frozen model too


def made(model: type[M], values: dict[str, Any]) -> M:
    """``model.model_construct(**values)`` without its loop over the fields (a frame per
    output piece): ``values`` hold its fields in declaration order, none left to default."""
    built = model.__new__(model)
    _set(built, "__dict__", values)
    _set(built, "__pydantic_fields_set__", set(values))
    _set(built, "__pydantic_extra__", None)
    _set(built, "__pydantic_private__", None)
    return built


def wire(model: BaseModel) -> dict[str, Any]:
    """``model`` as JSON-ready data, as clients read it: fields in declaration order, an
    unset field whose default is None left out, values as they are (nested models too)."""
    values = model.__dict__
    layout = _layout(type(model))
    if layout is None:  # no field to leave out or to turn into data: as it is
        return dict(values)
    given = model.__pydantic_fields_set__
    data: dict[str, Any] = {}
    for name, optional, nested in layout:
        if name not in given and (optional or name not in values):
            continue  # left out (a fitted cell whose code was too long has none)
        value = values[name]
        data[name] = _wire_value(value) if nested else value
    return data


def _wire_value(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return wire(value)
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return [_wire_value(item) for item in value]
    return value


@functools.cache
def _layout(model: type[BaseModel]) -> tuple[tuple[str, bool, bool], ...] | None:
    """Per field of ``model``: its name, whether it is left out when unset (default None),
    whether it may hold models; None when no field is either (its values are its data)."""
    layout = tuple(
        (name, not field.is_required() and field.default is None, _holds_models(field.annotation))
        for name, field in model.model_fields.items()
    )
    return None if not any(optional or nested for _, optional, nested in layout) else layout


def _holds_models(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_holds_models(arg) for arg in get_args(annotation))
