"""A result's JSON, in one place: :func:`to_json` walks a dataclass by its fields (not
``dataclasses.asdict``, which deep-copies tensors). A result declares its JSON:

- each field is written under its name, in the fields' order; ``field(metadata=json_field(...))``
  renames it (``key``), skips it (``skip``), passes it through a function (``encode``), leaves it
  out when None (``omit_none``), rounds its floats (``digits``), writes a mapping's keys into
  the record (``inline``) or writes it inside a group (``group``: ``{"sparsity": {"l0": ..}}``);
- ``json_extra`` names properties or no-argument methods written after the fields (derived values,
  e.g. ``DepthMeasurement.heads_per_layer``), or maps keys to them (``{"top": "top_tokens"}``);
- ``json_order`` lists the keys in the JSON's order when that is not the fields' (all of them).

Values: a registered encoder first (:data:`ENCODERS`, one per type, looked up along the MRO: an
Enum is its value, a path its text; ``heads/registry.py`` registers ``HeadId`` as ``"L.H"``), then
dataclasses (one that still writes its own ``to_dict`` is asked for it), mappings, lists and
tuples, tensors, numpy arrays and scalars (``tolist``). :class:`Jsonable` gives ``to_dict()``
and ``from_dict()``: :func:`from_json` reads a record back by the same declarations.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import Any, ClassVar

#: type -> its JSON value (looked up along the value's MRO, so a subclass inherits it).
ENCODERS: dict[type, Callable[[Any], Any]] = {enum.Enum: lambda e: e.value, PurePath: str}
#: type -> its value from JSON, where that is not ``type(json_value)`` (an Enum's, a path's).
DECODERS: dict[type, Callable[[Any], Any]] = {}

_PLAIN = (str, int, float, bool, type(None))


def register_encoder(
    cls: type, encode: Callable[[Any], Any], decode: Callable[[Any], Any] | None = None
) -> None:
    """Write every ``cls`` value (and a subclass's) as ``encode(value)``, read as ``decode``."""
    ENCODERS[cls] = encode
    if decode is not None:
        DECODERS[cls] = decode


@dataclasses.dataclass(frozen=True)
class JsonField:
    """A field's JSON choices (module docstring); ``inline``: a mapping field's keys written into
    the record itself (one already there keeps its place)."""

    key: str | None = None
    skip: bool = False
    digits: int | None = None
    omit_none: bool = False
    encode: Callable[[Any], Any] | None = None
    inline: bool = False
    group: str | None = None
    decode: Callable[[Any], Any] | None = None


def json_field(**choices: Any) -> dict[str, JsonField]:
    """A field's JSON choices (:class:`JsonField`), as ``dataclasses.field(metadata=...)``."""
    return {"json": JsonField(**choices)}


_DEFAULT = JsonField()


def to_json(obj: Any) -> Any:
    """``obj`` as JSON-able values (dicts, lists, str, numbers, bools, None)."""
    if type(obj) in _PLAIN:
        return obj
    for cls in type(obj).__mro__:
        if cls in ENCODERS:
            return ENCODERS[cls](obj)
    if isinstance(obj, Jsonable) or (dataclasses.is_dataclass(obj) and not isinstance(obj, type)):
        return _record(obj)
    if isinstance(obj, Mapping):
        return {k if type(k) in _PLAIN else to_json(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_json(v) for v in obj]
    if hasattr(obj, "tolist"):  # torch tensors, numpy arrays and numpy scalars
        return obj.tolist()
    if isinstance(obj, _PLAIN):  # a subclass of a plain type (e.g. numpy.float64 is a float)
        return obj
    raise TypeError(f"no JSON encoding for {type(obj).__name__}")


def _rounded(value: Any, digits: int) -> Any:
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, list):
        return [_rounded(v, digits) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v, digits) for k, v in value.items()}
    return value


def _record(obj: Any) -> Any:
    cls = type(obj)
    own = getattr(cls, "to_dict", None)
    if own is not None and own is not Jsonable.to_dict:
        return obj.to_dict()  # a result that still writes its own JSON
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj) if dataclasses.is_dataclass(obj) else ():
        spec = f.metadata.get("json", _DEFAULT)
        value = getattr(obj, f.name)
        if spec.encode is not None and value is not None:
            value = spec.encode(value)
        if spec.skip or (spec.omit_none and value is None):
            continue
        value = to_json(value)
        value = value if spec.digits is None else _rounded(value, spec.digits)
        if spec.inline:
            out.update(value)
        elif spec.group:
            out.setdefault(spec.group, {})[spec.key or f.name] = value
        else:
            out[spec.key or f.name] = value
    extra = getattr(cls, "json_extra", ())
    for key, name in (extra if isinstance(extra, Mapping) else {n: n for n in extra}).items():
        value = getattr(obj, name)
        out[key] = to_json(value() if callable(value) else value)
    order = getattr(cls, "json_order", ())
    if order:
        unlisted = set(out) - set(order)
        if unlisted:
            raise TypeError(f"{cls.__name__}.json_order does not list {sorted(unlisted)}")
        out = {k: out[k] for k in order if k in out}
    return out


def from_json(cls: type, data: Mapping[str, Any]) -> Any:
    """A ``cls`` record back from its JSON ``data``, the declarations inverted: a field is read
    under its ``key``, inside its ``group``; ``inline``, from the record itself (a dataclass: None
    when its keys are all missing or null; a mapping: the keys no other field writes); its value by
    ``decode`` or its type (a dataclass by its ``from_dict``, lists, tuples and dicts of them,
    ``X | None``, a registered type by :data:`DECODERS`, an Enum or a path by its class). A key
    left out takes the field's default (a file written before the field came), else None where
    the type allows it (a skipped field is read where a ``from_dict`` puts it); other keys
    (``json_extra``'s) are not read."""
    hints, taken = _plan(cls)
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        spec, kind = f.metadata.get("json", _DEFAULT), hints[f.name]
        where, key = data.get(spec.group, {}) if spec.group else data, spec.key or f.name
        inner = _dataclass_in(kind)
        if spec.inline and inner:
            value = data if any(data.get(k) is not None for k in _plan(inner)[1]) else None
        elif spec.inline:
            value = {k: v for k, v in data.items() if k not in taken}
        elif key in where:
            value = where[key]
        elif (
            type(None) in typing.get_args(kind)
            and dataclasses.MISSING is f.default is f.default_factory
        ):
            value = None
        else:
            continue  # the default, or the constructor names the missing field (a TypeError)
        kw[f.name] = spec.decode(value) if spec.decode else _read(kind, value)
    return cls(**kw)


@functools.cache
def _plan(cls: type) -> tuple[dict[str, Any], frozenset[str]]:
    """``cls``'s field types and the record keys it writes (its fields', groups', extras')."""
    hints, keys = typing.get_type_hints(cls), set(getattr(cls, "json_extra", ()))
    for f in dataclasses.fields(cls):
        spec = f.metadata.get("json", _DEFAULT)
        if not spec.inline:
            keys.add(spec.group or spec.key or f.name)
        elif inner := _dataclass_in(hints[f.name]):
            keys |= _plan(inner)[1]
    return hints, frozenset(keys)


def _dataclass_in(kind: Any) -> Any:
    """The dataclass ``kind`` is (or ``X | None`` holds; not a mapping's values'); None if none."""
    held = typing.get_args(kind) if typing.get_origin(kind) is not dict else ()
    return next((a for a in (kind, *held) if dataclasses.is_dataclass(a)), None)


def _read(kind: Any, value: Any) -> Any:
    """``value`` (JSON) as a ``kind`` (a type hint)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if value is None:
        return None
    if origin in (typing.Union, types.UnionType):
        kinds = [a for a in args if a is not type(None)]
        return _read(kinds[0], value) if len(kinds) == 1 else value
    if origin in (list, tuple) and args:
        fixed = origin is tuple and args[-1] is not ... and len(args) == len(value)
        each = args if fixed else [args[0]] * len(value)  # a pair of 3 is left to validate
        return origin(_read(k, v) for k, v in zip(each, value, strict=True))
    if origin is dict and args:
        return {k: _read(args[1], v) for k, v in value.items()}
    if dataclasses.is_dataclass(kind):
        return getattr(kind, "from_dict", functools.partial(from_json, kind))(value)
    for cls in getattr(kind, "__mro__", ()):
        if cls in DECODERS:
            return DECODERS[cls](value)
        if cls in ENCODERS:
            return kind(value)
    return value


class Jsonable:
    """A result's ``to_dict()``: :func:`to_json` of it (declared by its fields' metadata,
    ``json_extra`` and ``json_order``; module docstring). A class that is not a dataclass (a
    codec) writes its ``json_extra`` alone."""

    json_extra: ClassVar[tuple[str, ...] | Mapping[str, str]] = ()
    json_order: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)

    from_dict = classmethod(from_json)
