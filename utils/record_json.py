"""Record dataclasses to JSON values and back, by their type hints.

The run record (``utils.run_record``) is dataclasses in Python and JSON at its edges. One generic
pair converts them: ``to_json`` (fields by their JSON keys, step records merged flat) and
``from_mapping`` (parsed JSON checked against the type hints: unknown keys ignored, missing keys
their field's default, a wrong type a one-line ``RecordError`` naming where). ``dataclass_schema``
describes the same shape as JSON Schema. Field metadata: ``key`` (stored under another name),
``flat`` (its keys merged into the parent), ``omit_none`` (left out when None).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import field
from typing import Any, TypeVar

from utils.errors import TreeRAGError

_T = TypeVar("_T")


class RecordError(TreeRAGError):
    """A stored record that cannot be read as one (a wrong type, a newer version)."""


def _key(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("key", f.name))


def _flat(f: dataclasses.Field[Any]) -> bool:
    return bool(f.metadata.get("flat"))


def key(name: str, default: Any = None, factory: Any = None) -> Any:
    """A field stored under another JSON key (the flat names of the first version)."""
    if factory is not None:
        return field(default_factory=factory, metadata={"key": name})
    return field(default=default, metadata={"key": name})


def to_json(value: Any) -> Any:
    """A record (or a part of one) as JSON values: dataclasses by their keys, step records merged
    flat. The one way out to JSON; ``from_mapping`` is the way back."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if _flat(f):
                out.update(to_json(v))
            elif not (f.metadata.get("omit_none") and v is None):
                out[_key(f)] = to_json(v)
        return out
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if hasattr(value, "item") and hasattr(value, "dtype"):  # a numpy scalar that slipped through
        return value.item()
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def kind_of(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _convert(value: Any, hint: Any, where: str) -> Any:
    """``value`` (parsed JSON) as ``hint`` says, or a RecordError naming where it is wrong."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return _convert(value, option, where)
            except RecordError:
                continue
        raise RecordError(f"{where} is {kind_of(value)}, not {hint}")
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, Mapping):
            raise RecordError(f"{where} is {kind_of(value)}, not an object")
        return from_mapping(hint, value, where)
    if origin is list:
        if not isinstance(value, list):
            raise RecordError(f"{where} is {kind_of(value)}, not a list")
        return [_convert(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, Mapping):
            raise RecordError(f"{where} is {kind_of(value)}, not an object")
        return {str(k): _convert(v, args[1], f"{where}.{k}") for k, v in value.items()}
    if hint is float:
        if value is None:  # a NaN score is written as null (utils.json_out)
            return math.nan
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(hint, type) and isinstance(value, hint):
        return value
    raise RecordError(f"{where} is {kind_of(value)}, not {getattr(hint, '__name__', hint)}")


def from_mapping(cls: type[_T], data: Mapping[str, Any], where: str = "record") -> _T:
    """A record dataclass from its JSON object: unknown keys ignored, a missing key its field's
    default (a key added in a later version reads from an older record), a wrong type an error."""
    hints = _hints(typing.cast(type, cls))
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if _flat(f):
            values[f.name] = from_mapping(hints[f.name], data, where)
            continue
        k = _key(f)
        if k in data:
            values[f.name] = _convert(data[k], hints[f.name], f"{where}.{k}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise RecordError(f"{where} has no {k!r}")
    return cls(**values)


def dataclass_schema(cls: type) -> dict[str, Any]:
    """The JSON Schema of ``to_json`` of a record class, from the type hints ``from_mapping`` reads."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if _flat(f):
            inner = dataclass_schema(hints[f.name])
            properties.update(inner["properties"])
            required += inner["required"]
            continue
        properties[_key(f)] = _schema_of(hints[f.name])
        if not f.metadata.get("omit_none"):
            required.append(_key(f))
    return {"type": "object", "properties": properties, "required": required}


_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def _schema_of(hint: Any) -> dict[str, Any]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if all(a in _JSON_TYPES for a in args):
            return {"type": [_JSON_TYPES[a] for a in args]}
        return {"anyOf": [_schema_of(a) for a in args]}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return dataclass_schema(hint)
    if origin is list:
        return {"type": "array", "items": _schema_of(args[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema_of(args[1])}
    if hint is float:
        return {"type": ["number", "null"]}  # a non-finite score is written as null
    return {"type": _JSON_TYPES.get(hint, "string")}
