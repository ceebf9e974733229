"""Declarative validation of frozen dataclasses: one mechanism for objects built in code and from files.

A field declared with :func:`spec` carries its rule (range, choices); :func:`validate` checks every field of
a dataclass instance against its type and rule, and :func:`from_mapping` builds an instance from a parsed
TOML/JSON table, rejecting unknown keys with a suggestion. Messages name the field and the rule::

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Ports:
    ...     ports: int = spec(ge=1)
    ...     def __post_init__(self):
    ...         validate(self)
    >>> Ports(0)
    Traceback (most recent call last):
    ...
    synth.errors.InvalidInput: ports: must be >= 1, got 0
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from typing import Any, Mapping

from .errors import InvalidInput, unknown_key_message

_MISSING = dataclasses.MISSING
MAX_INT = 2 ** 53       # integers a float holds exactly; beyond, the models' float arithmetic overflowed
MAX_FLOAT = 1e30        # no field comes near (bytes, FLOP/s, dollars are in their units); 1e308 overflowed


def spec(default: Any = _MISSING, *, ge: float | None = None, gt: float | None = None,
         le: float | None = None, lt: float | None = None, choices: tuple | None = None,
         doc: str = "") -> Any:
    """A dataclass field with a validation rule (`ge`, `gt`, `le`, `lt`, `choices`) and a doc string."""
    meta = {"ge": ge, "gt": gt, "le": le, "lt": lt, "choices": choices, "doc": doc}
    if isinstance(default, (list, dict, set)):
        raise TypeError("mutable default; use a tuple")
    return dataclasses.field(default=default, metadata=meta)


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is tuple:
        return "a list"
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in typing.get_args(tp))
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false",
            type(None): "absent"}.get(tp, getattr(tp, "__name__", str(tp)))


def _coerce(value: Any, tp: Any, field: str) -> Any:
    """Return `value` converted to type `tp` (int -> float, list -> tuple) or raise InvalidInput."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is not None and len(args) == 1:       # optional: the type's own message (e.g. its size)
            return _coerce(value, args[0], field)
        for arg in typing.get_args(tp):
            try:
                return _coerce(value, arg, field)
            except InvalidInput:
                continue
        raise InvalidInput(f"must be {_type_name(tp)}, got {value!r}", field=field)
    if origin is typing.Literal:
        if value in typing.get_args(tp):
            return value
        raise InvalidInput(f"must be {_type_name(tp)}, got {value!r}", field=field)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise InvalidInput(f"must be a list, got {value!r}", field=field)
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], f"{field}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise InvalidInput(f"must be a list of {len(args)} items, got {len(value)}", field=field)
        return tuple(_coerce(v, a, f"{field}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if tp is type(None):
        if value is None:
            return None
        raise InvalidInput(f"must be absent, got {value!r}", field=field)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise InvalidInput(f"must be true or false, got {value!r}", field=field)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, (int,)):
            if not (isinstance(value, float) and value.is_integer()):
                raise InvalidInput(f"must be an integer, got {value!r}", field=field)
        if abs(value) > MAX_INT:
            raise InvalidInput(f"must be at most {MAX_INT:g} in size, got {value:g}", field=field)
        return int(value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidInput(f"must be a number, got {value!r}", field=field)
        value = float(value)
        if not math.isfinite(value):
            raise InvalidInput(f"must be a finite number, got {value!r}", field=field)
        if abs(value) > MAX_FLOAT:
            raise InvalidInput(f"must be at most {MAX_FLOAT:g} in size, got {value:g}", field=field)
        return value
    if tp is str:
        if not isinstance(value, str):
            raise InvalidInput(f"must be a string, got {value!r}", field=field)
        return value
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if isinstance(value, Mapping):
            return from_mapping(tp, value, prefix=field)
        raise InvalidInput(f"must be a table, got {value!r}", field=field)
    return value


def _check_rule(name: str, value: Any, meta: Mapping[str, Any]) -> None:
    if value is None:
        return
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        raise InvalidInput(f"must be one of {', '.join(map(str, choices))}; got {value!r}", field=name)
    numbers = [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []
    if isinstance(value, tuple):
        numbers = [v for v in value if isinstance(v, (int, float)) and not isinstance(v, bool)]
    for v in numbers:
        for key, ok, word in (("ge", lambda a, b: a >= b, ">="), ("gt", lambda a, b: a > b, ">"),
                              ("le", lambda a, b: a <= b, "<="), ("lt", lambda a, b: a < b, "<")):
            bound = meta.get(key)
            if bound is not None and not ok(v, bound):
                raise InvalidInput(f"must be {word} {bound:g}, got {v!r}", field=name)


def finite_number(value: Any, positive: bool = False) -> bool:
    """Whether `value` is a real number (not a bool), finite and >= 0 (> 0 with `positive`)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) \
        and (value > 0 if positive else value >= 0)


def validate(obj: Any) -> None:
    """Check (and coerce in place) every field of a frozen dataclass instance against its type and rule."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        if not f.init:
            continue
        value = getattr(obj, f.name)
        coerced = _coerce(value, hints[f.name], f.name)
        if coerced is not value:
            object.__setattr__(obj, f.name, coerced)
        _check_rule(f.name, coerced, f.metadata)


def field_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]


def from_mapping(cls: type, data: Mapping[str, Any], *, prefix: str | None = None,
                 source: str | None = None, **extra: Any) -> Any:
    """Build dataclass `cls` from a parsed table; unknown or missing keys raise InvalidInput.

    `extra` supplies values that are not in the table (e.g. computed defaults); the table wins.
    """
    if not isinstance(data, Mapping):
        raise InvalidInput(f"must be a table, got {data!r}", field=prefix, source=source)
    names = field_names(cls)
    for key in data:
        if key not in names:
            raise InvalidInput(unknown_key_message(key, names), field=prefix, source=source)
    kwargs = {**extra, **data}
    for f in dataclasses.fields(cls):
        if f.init and f.name not in kwargs and f.default is _MISSING and f.default_factory is _MISSING:
            raise InvalidInput("missing required key", field=f"{prefix}.{f.name}" if prefix else f.name,
                               source=source)
    try:
        return cls(**kwargs)
    except InvalidInput as exc:
        raise exc.located(source, prefix) from None


def to_mapping(obj: Any) -> dict[str, Any]:
    """A dataclass as a plain dict of TOML/JSON-friendly values (tuples become lists)."""
    def plain(v: Any) -> Any:
        if dataclasses.is_dataclass(v):
            return to_mapping(v)
        if isinstance(v, tuple):
            return [plain(x) for x in v]
        return v
    return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init}
