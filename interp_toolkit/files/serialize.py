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
tuples, tensors, numpy arrays and scalars (``tolist``). :class:`Jsonable` gives ``to_dict()``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import Any, ClassVar

#: type -> its JSON value (looked up along the value's MRO, so a subclass inherits it).
ENCODERS: dict[type, Callable[[Any], Any]] = {enum.Enum: lambda e: e.value, PurePath: str}

_PLAIN = (str, int, float, bool, type(None))


def register_encoder(cls: type, encode: Callable[[Any], Any]) -> None:
    """Write every ``cls`` value (and a subclass's) as ``encode(value)``."""
    ENCODERS[cls] = encode


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


class Jsonable:
    """A result's ``to_dict()``: :func:`to_json` of it (declared by its fields' metadata,
    ``json_extra`` and ``json_order``; module docstring). A class that is not a dataclass (a
    codec) writes its ``json_extra`` alone."""

    json_extra: ClassVar[tuple[str, ...] | Mapping[str, str]] = ()
    json_order: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)
