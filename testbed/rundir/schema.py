"""The run record's schema as Markdown, made from the models themselves.

``docs/results.md`` carries this text between markers, rewritten by
``testbed report``, so the documentation of run.json and verdicts.json can
never drift from what the code reads and writes.
"""
from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel

from testbed.rundir.record import RunRecord, RunVerdicts

#: The files, and the model each holds.
FILES = (("run.json", RunRecord), ("verdicts.json", RunVerdicts))


def type_name(annotation: Any) -> str:
    """A field's type as a reader of JSON thinks of it."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union:
        kept = [a for a in args if a is not type(None)]
        return " or ".join(type_name(a) for a in kept) + (" (optional)" if len(kept) < len(args) else "")
    if origin in (list, tuple):
        return f"list of {type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"object of {type_name(args[1])}" if args else "object"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"`{annotation.__name__}`"
    names = {str: "text", int: "integer", float: "number", bool: "true/false"}
    return names.get(annotation, "any" if annotation is Any else getattr(annotation, "__name__", str(annotation)))


def nested_models(model: type[BaseModel]) -> list[type[BaseModel]]:
    """The models ``model``'s fields are made of, depth first, each once."""
    found: list[type[BaseModel]] = []

    def walk(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation not in found:
                found.append(annotation)
                for f in annotation.model_fields.values():
                    walk(f.annotation)
        for arg in typing.get_args(annotation):
            walk(arg)

    for f in model.model_fields.values():
        walk(f.annotation)
    return found


def table(model: type[BaseModel]) -> list[str]:
    lines = ["| key | type | required | meaning |", "|---|---|---|---|"]
    for name, f in model.model_fields.items():
        key = f.alias or name
        doc = (f.description or "").replace("|", "\\|")
        lines.append(f"| `{key}` | {type_name(f.annotation)} | {'yes' if f.is_required() else 'no'} | {doc} |")
    return lines


def markdown() -> str:
    """Every file's keys, then the objects they contain, as Markdown tables."""
    out: list[str] = []
    seen: list[type[BaseModel]] = []
    for filename, model in FILES:
        out += [f"#### `{filename}` (`{model.__name__}`)", "", (model.__doc__ or "").strip(), ""]
        out += table(model) + [""]
        for inner in nested_models(model):
            if inner not in seen:
                seen.append(inner)
                out += [f"##### `{inner.__name__}`", "", (inner.__doc__ or "").strip(), ""]
                out += table(inner) + [""]
    out.append("Unknown keys are refused, as are missing required ones, with the file and the key named.")
    return "\n".join(out)
