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


#: Fewest members a run of like streams needs to be written back as a family.
#: Small files stay written out, as their authors wrote them.
COMPACT_AT_LEAST = 64
#: What a family deals out to its members; everything else they share.
_DEALT = ("id", "window", "source", "name")


def compact_families(streams: list[dict[str, Any]], least: int = COMPACT_AT_LEAST) -> list[dict[str, Any]]:
    """``streams`` (each as ``Stream.model_dump`` gives it) with every run of at
    least ``least`` members of one family written as that family again.

    The inverse of ``expand_families``, used where a run writes its topology:
    every part of a run that reads the file expands it again, and 65,536
    streams written out are tens of megabytes.  A run is taken as a family
    only if expanding the family gives back exactly its streams, so the file
    always means what the streams do."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(streams):
        end = _like_run_end(streams, i)
        if end - i >= least and all("window" in s for s in streams[i:end]):
            entry = _family_of(streams[i:end])
            if expand_families([entry]) == streams[i:end]:
                out.append(entry)
                i = end
                continue
        out.append(streams[i])
        i += 1
    return out


def _shared(stream: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in stream.items() if k not in _DEALT}


def _like_run_end(streams: list[dict[str, Any]], start: int) -> int:
    """Where the run of streams like ``streams[start]`` ends: consecutive ids,
    the same shared fields, and names (if any) ``<name>-<k>``."""
    first = streams[start]
    shared, base = _shared(first), _name_base(first)
    end = start + 1
    while end < len(streams):
        s, k = streams[end], end - start
        if (s.get("id") != first.get("id", 0) + k or _shared(s) != shared
                or (base is None) != ("name" not in s) or (base is not None and s["name"] != f"{base}-{k}")):
            break
        end += 1
    return end


def _name_base(stream: dict[str, Any]) -> Optional[str]:
    name = stream.get("name")
    return name[:-2] if isinstance(name, str) and name.endswith("-0") else None


def _period(values: list[Any]) -> list[Any]:
    """The shortest list that, dealt out in turn, gives ``values``."""
    for p in range(1, len(values) + 1):
        if all(values[k] == values[k % p] for k in range(p, len(values))):
            return values[:p]
    return values


def _family_of(members: list[dict[str, Any]]) -> dict[str, Any]:
    first = members[0]
    family: dict[str, Any] = {"count": len(members), "windows": _period([m["window"] for m in members])}
    if all("source" in m for m in members):
        family["sources"] = _period([m["source"] for m in members])
    entry = dict(_shared(first), family=family, id=first["id"])
    if "name" in first:
        entry["name"] = _name_base(first)
    return entry
