"""The compiled program as bmv2 sees it: tables, actions, registers, counters.

``ProgramInfo`` reads p4c's bmv2 JSON and resolves the contract's short
names (``window_spec``, ``newest_op``) to bmv2's qualified ones
(``MyIngress.window_spec``, ``MyIngress.slides.newest_op``), with the key
and parameter widths the control client needs to encode values.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence


@dataclass(frozen=True)
class TableInfo:
    name: str                       # qualified, e.g. MyIngress.window_spec
    key_names: tuple[str, ...]      # as @name gives them, e.g. ("stream", "newest_op")
    key_widths: tuple[int, ...]
    match_types: tuple[str, ...]
    actions: tuple[str, ...]        # qualified action names
    max_size: int = 0               # entries the table holds


@dataclass(frozen=True)
class ActionInfo:
    name: str
    param_names: tuple[str, ...]
    param_widths: tuple[int, ...]


@dataclass(frozen=True)
class ArrayInfo:
    name: str
    size: int
    bitwidth: int = 0               # registers only


def short_name(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]


class ProgramInfo:
    """Tables, actions, registers and counters of a bmv2 JSON, by short name.

    A short name is the last component of the qualified one.  Qualified
    names are accepted as well; a short name that two objects share is
    refused rather than guessed.
    """

    def __init__(self, config: dict[str, Any]):
        header_types = {h["name"]: {f[0]: f[1] for f in h["fields"]} for h in config["header_types"]}
        header_of = {h["name"]: h["header_type"] for h in config["headers"]}

        def width(target: Sequence[str]) -> int:
            return header_types[header_of[target[0]]][target[1]]

        self.actions: dict[str, ActionInfo] = {}
        for a in config["actions"]:
            self.actions[a["name"]] = ActionInfo(
                a["name"], tuple(p["name"] for p in a["runtime_data"]),
                tuple(p["bitwidth"] for p in a["runtime_data"]))
        self.tables: dict[str, TableInfo] = {}
        for pipe in config["pipelines"]:
            for t in pipe["tables"]:
                self.tables[t["name"]] = TableInfo(
                    t["name"], tuple(k.get("name", "") for k in t["key"]),
                    tuple(width(k["target"]) for k in t["key"]),
                    tuple(k["match_type"] for k in t["key"]), tuple(t["actions"]), t.get("max_size", 0))
        self.registers = {r["name"]: ArrayInfo(r["name"], r["size"], r["bitwidth"])
                          for r in config["register_arrays"]}
        self.counters = {c["name"]: ArrayInfo(c["name"], c["size"])
                         for c in config["counter_arrays"] if not c.get("is_direct")}
        self._found: dict[tuple[str, str], Any] = {}

    @classmethod
    def from_file(cls, path: Path) -> "ProgramInfo":
        return cls(json.loads(Path(path).read_text()))

    @staticmethod
    def _resolve(kind: str, objects: dict[str, Any], name: str) -> Any:
        if name in objects:
            return objects[name]
        hits = [obj for q, obj in objects.items() if short_name(q) == name]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise KeyError(f"no {kind} named {name}")
        raise KeyError(f"{kind} name {name} is ambiguous: {', '.join(sorted(h.name for h in hits))}")

    def table(self, name: str) -> TableInfo:
        found = self._found.get(("table", name))
        if found is None:
            found = self._found[("table", name)] = self._resolve("table", self.tables, name)
        return found

    def action(self, table: TableInfo, name: str) -> ActionInfo:
        # Resolved once per name: a plan of 131,072 entries looked each up
        # among every table's names, and that took minutes.
        found = self._found.get((table.name, name))
        if found is None:
            candidates = {a: self.actions[a] for a in table.actions}
            found = self._found[(table.name, name)] = self._resolve(
                f"action of {short_name(table.name)}", candidates, name)
        return found

    def register(self, name: str) -> ArrayInfo:
        return self._resolve("register", self.registers, name)

    def counter(self, name: str) -> ArrayInfo:
        return self._resolve("counter", self.counters, name)
