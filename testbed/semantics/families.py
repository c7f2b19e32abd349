"""Stream families: many streams declared once.

S4 runs tens of thousands of concurrent streams.  Written out one by one,
4,096 streams are a file nobody reads.  A ``streams`` entry with a
``family`` stands for ``count`` streams: the entry's fields are every
member's, its ``id`` is the first member's and each next member takes the
next id, and ``windows`` (if given) are dealt out in turn, member k taking
``windows[k mod len(windows)]``; ``sources`` likewise spread the members'
sending over several hosts.  A ``name`` becomes ``<name>-<k>``.

Families are expanded when the file is read, before anything is validated,
so the plan, the checks, ``run.json`` and the results see the members as
if each had been written out.
"""
from __future__ import annotations

from typing import Any, Optional

from pydantic import Field, ValidationError

from testbed.semantics.limits import MAX_STREAM_ID, N_STREAMS
from testbed.semantics.strict import FieldError, StrictModel, describe


class StreamFamily(StrictModel):
    """How many streams one entry stands for, and the window specs dealt out among them."""

    count: int = Field(ge=1, le=N_STREAMS, description="members: ids id .. id + count - 1")
    windows: Optional[list[dict[str, Any]]] = Field(default=None, min_length=1,
                                                    description="member k takes windows[k mod len]")
    sources: Optional[list[str]] = Field(default=None, min_length=1,
                                         description="member k is sent by sources[k mod len]")


def expand_families(streams: Any) -> Any:
    """``streams`` with every family entry replaced by its members (anything else is left to validation)."""
    if not isinstance(streams, list) or not any(isinstance(s, dict) and "family" in s for s in streams):
        return streams
    out: list[Any] = []
    for i, entry in enumerate(streams):
        if not (isinstance(entry, dict) and "family" in entry):
            out.append(entry)
            continue
        try:
            family = StreamFamily.model_validate(entry["family"])
        except ValidationError as err:
            found = describe(err)
            raise FieldError(f"streams[{i}].family" + ("" if found.startswith("(top level)") else
                                                       "." + found.split(": ", 1)[0]),
                             found.split(": ", 1)[1]) from None
        first = entry.get("id")
        if type(first) is not int or first < 0:
            raise FieldError(f"streams[{i}].id", "a family needs the id of its first stream, an integer >= 0")
        if first + family.count - 1 > MAX_STREAM_ID:
            raise FieldError(f"streams[{i}].family.count",
                             f"ids {first} .. {first + family.count - 1} pass {MAX_STREAM_ID}, the largest "
                             f"16-bit stream id")
        if family.windows is None and "window" not in entry:
            raise FieldError(f"streams[{i}].family.windows", "give the members a window: here or as window:")
        base = {k: v for k, v in entry.items() if k != "family"}
        for k in range(family.count):
            member = dict(base, id=first + k)
            if family.windows is not None:
                member["window"] = family.windows[k % len(family.windows)]
            if family.sources is not None:
                member["source"] = family.sources[k % len(family.sources)]
            if isinstance(base.get("name"), str):
                member["name"] = f"{base['name']}-{k}"
            out.append(member)
    return out
