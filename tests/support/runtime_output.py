"""Reading simple_switch_CLI's output back into values.

The same parser reads bmv2's real ``simple_switch_CLI`` and the embedded
target's ``RuntimeCLI``, so a test that passes on both shows the shapes agree.
"""
from __future__ import annotations

import re

PROMPT = "RuntimeCmd: "
ENTRY = re.compile(r"^Dumping entry (0x[0-9a-f]+)$")
KEY = re.compile(r"^\* (\S+)\s*: EXACT\s+([0-9a-f]+)$")
ACTION = re.compile(r"^Action entry: (\S+) - ?(.*)$")
COUNTER = re.compile(r"^(\S+)\[(\d+)\]= \((\d+) bytes, (\d+) packets\)$")
REGISTER = re.compile(r"^(\S+)\[(\d+)\]= (\d+)$")
GROUP = re.compile(r"^mgrp\((\d+)\)$")
NODE = re.compile(r"^ {2}-> \(L1h=(\d+), rid=(\d+)\) -> \(ports=\[([0-9, ]*)\], lags=\[\]\)$")


def lines(output: str) -> list[str]:
    """Output lines without the prompts that precede each command's output."""
    out = []
    for line in output.splitlines():
        while line.startswith(PROMPT):
            line = line[len(PROMPT):]
        out.append(line)
    return out


def table_dumps(output: str) -> list[list[dict]]:
    """Each ``table_dump``'s entries, in order: ``{"handle", "match", "action", "params"}``
    with the action's short name and every value as an int."""
    dumps: list[list[dict]] = []
    entry: dict = {}
    for line in lines(output):
        if line == "TABLE ENTRIES":
            dumps.append([])
        elif m := ENTRY.match(line):
            entry = {"handle": int(m.group(1), 16), "match": []}
        elif m := KEY.match(line):
            entry["match"].append(int(m.group(2), 16))
        elif (m := ACTION.match(line)) and entry:
            data = [d.strip() for d in m.group(2).split(",") if d.strip()]
            entry.update(action=m.group(1).rsplit(".", 1)[-1], params=[int(d, 16) for d in data])
            dumps[-1].append(entry)
            entry = {}
    return dumps


def counters(output: str) -> dict[tuple[str, int], tuple[int, int]]:
    """``counter_read`` results: ``(name, index) -> (bytes, packets)``."""
    return {(m.group(1), int(m.group(2))): (int(m.group(3)), int(m.group(4)))
            for line in lines(output) if (m := COUNTER.match(line))}


def registers(output: str) -> dict[tuple[str, int], int]:
    return {(m.group(1), int(m.group(2))): int(m.group(3)) for line in lines(output) if (m := REGISTER.match(line))}


def groups(output: str) -> dict[int, list[tuple[int, list[int]]]]:
    """``mc_dump``: ``mgid -> [(rid, ports)]``."""
    out: dict[int, list[tuple[int, list[int]]]] = {}
    current = None
    for line in lines(output):
        if m := GROUP.match(line):
            current = out.setdefault(int(m.group(1)), [])
        elif (m := NODE.match(line)) and current is not None:
            current.append((int(m.group(2)), [int(p) for p in m.group(3).split(",") if p.strip()]))
    return out


def planned_tables(plan) -> dict[str, list[dict]]:
    """The plan's entries per table as a ``table_dump`` reads them (ints, sorted by match)."""
    from testbed.dataplane.contract import SCHEMA, to_int

    out: dict[str, list[dict]] = {t: [] for t in SCHEMA}
    for e in plan.entries():
        kinds = [p.kind for p in SCHEMA[e.table].actions[e.action].params]
        out[e.table].append({"match": [int(v) for v in e.match], "action": e.action,
                             "params": [to_int(v, k) for k, v in zip(kinds, e.params)]})
    return {t: sorted(entries, key=lambda e: e["match"]) for t, entries in out.items()}
