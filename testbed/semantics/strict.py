"""The base of every schema a user's file is read into, and its one-line errors.

Pydantic's lax mode turns ``true`` into 1 and accepts ``.inf`` for a float.
In a topology or experiment file either is a mistake that a run would carry
out silently (``id: true`` became stream 1; ``seconds: .inf`` never ended),
so every schema here refuses both.  Strict mode proper is not used: it would
also refuse a YAML list where a tuple is declared, which is no mistake.
"""
from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from testbed.semantics import limits


class FieldError(ValueError):
    """Raised inside validators to name a field other than the one validated."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


#: Events per second a source can be asked for.
Rate = Annotated[float, Field(ge=limits.MIN_RATE, le=limits.MAX_RATE)]
#: How many events a measurement sends: far below the 32-bit seq, so that
#: its raw data fits in memory.
MAX_MEASURED_EVENTS = 10_000_000
EventCount = Annotated[int, Field(ge=1, le=MAX_MEASURED_EVENTS)]
#: Operators of one stream in a plan: each sliding window of N needs its own
#: multicast group, and group ids are 16 bits.
OperatorCount = Annotated[int, Field(ge=1, le=limits.MAX_GROUPS)]
#: Streams of one plan: stream ids are 16 bits.
StreamCount = Annotated[int, Field(ge=1, le=limits.MAX_STREAM_ID + 1)]
#: Repetitions of a measurement loop.
Repeats = Annotated[int, Field(ge=1, le=100_000)]


class StrictModel(BaseModel):
    """Unknown fields refused, frozen, no infinities or NaN, and no boolean where a number or name belongs."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_for_other_types(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, value in data.items():
                if not isinstance(value, (bool, list, dict)):
                    continue        # no boolean can hide in it, and 65,536 streams make the walk costly
                field = cls.model_fields.get(name) if isinstance(name, str) else None
                found = _misplaced_bool(field.annotation, value) if field is not None else None
                if found is not None:
                    where, wanted, flag = found
                    raise FieldError(name + where, f"{str(flag).lower()} is a boolean, not {_wanted(wanted)}")
        return data


def _admits_bool(annotation: Any) -> bool:
    if annotation is bool or annotation is Any or annotation is object:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _admits_bool(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return any(_admits_bool(a) for a in typing.get_args(annotation))
    return False


def _misplaced_bool(annotation: Any, value: Any) -> tuple[str, Any, bool] | None:
    """Where in ``value`` a boolean stands for a type that is not one ("" for the value
    itself), the type wanted there and the boolean; None if nowhere."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _misplaced_bool(typing.get_args(annotation)[0], value)
    if isinstance(value, bool):
        return None if _admits_bool(annotation) else ("", annotation, value)
    if origin in (Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _misplaced_bool(members[0], value) if len(members) == 1 else None
    args = typing.get_args(annotation)
    if isinstance(value, list) and origin in (list, set, frozenset) and args:
        for i, item in enumerate(value):
            if not isinstance(item, (bool, list, dict)):
                continue
            inner = _misplaced_bool(args[0], item)
            if inner is not None:
                return (f"[{i}]{inner[0]}",) + inner[1:]
    if isinstance(value, dict) and origin is dict and len(args) == 2:
        for key, item in value.items():
            inner = _misplaced_bool(args[1], item)
            if inner is not None:
                return (f".{key}{inner[0]}",) + inner[1:]
    return None


def _wanted(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _wanted(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return " or ".join(_wanted(a) for a in typing.get_args(annotation) if a is not type(None))
    if origin in (list, tuple, set, frozenset):
        return "a list"
    if origin is dict:
        return "a mapping"
    if origin is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(annotation)))
    names = {int: "an integer", float: "a number", str: "a string"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def describe(err: ValidationError, name_pattern: str | None = None) -> str:
    """``field: message`` for the first error pydantic found, with the field spelt as in the file."""
    first = err.errors(include_url=False)[0]
    loc = ""
    for part in first["loc"]:
        if part == "[key]":
            continue
        if isinstance(part, int):
            loc += f"[{part}]"
        else:
            loc += ("." if loc else "") + str(part)
    ctx_error = (first.get("ctx") or {}).get("error")
    if isinstance(ctx_error, FieldError):     # a validator naming a field below the one it validated
        return f"{'.'.join(p for p in (loc, ctx_error.field) if p)}: {ctx_error.message}"
    msg = first["msg"]
    msg = msg.removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
    elif first["type"] == "finite_number":
        msg = "must be a finite number"
    elif first["type"] == "string_pattern_mismatch" and name_pattern is not None \
            and (first.get("ctx") or {}).get("pattern") == name_pattern:
        msg = f"{first['input']!r} is not a valid name (lower-case letter, then up to 9 letters or digits)"
    return f"{loc or '(top level)'}: {msg}"
