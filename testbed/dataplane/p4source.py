"""What ``p4/*.p4`` declares, read from its text: the contract's other spelling.

``contract.py`` restates the program's tables, actions, registers, counters
and constants for the model and the control plane.  This reader takes the
same facts from the P4 source itself, with no compiler, so a unit test can
hold the two together on any machine (and, where p4c exists, the compiled
JSON too).  It reads the subset of P4_16 the project writes: one
declaration per statement, exact-match keys named with ``@name``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

CONST = re.compile(r"^\s*const\s+(?:bit<\d+>|int)\s+(\w+)\s*=\s*(0x[0-9a-fA-F]+|0b[01]+|\d+)\s*;", re.M)
DEFINE = re.compile(r"^\s*#define\s+(\w+)\s+(\d+)\s*$", re.M)
TYPEDEF = re.compile(r"^\s*typedef\s+bit<(\d+)>\s+(\w+)\s*;", re.M)
#: A register's value width, cells and name; v1model's second type argument
#: (the index's type, since V1MODEL_VERSION 20200408) is optional.
INDEX_TYPE = r"(?:bit<\d+>|\w+)"
REGISTER = re.compile(rf"^\s*register<bit<(\d+)>(?:,\s*{INDEX_TYPE})?>\((\w+)\)\s+(\w+)\s*;", re.M)
COUNTER = re.compile(rf"^\s*counter(?:<{INDEX_TYPE}>)?\((\w+),\s*CounterType\.\w+\)\s+(\w+)\s*;", re.M)
ACTION = re.compile(r"\baction\s+(\w+)\s*\(([^)]*)\)", re.S)
TABLE = re.compile(r"\btable\s+(\w+)\s*\{")
KEY_NAME = re.compile(r'@name\("(\w+)"\)')
ACTIONS_LIST = re.compile(r"actions\s*=\s*\{([^}]*)\}")
SIZE = re.compile(r"size\s*=\s*(\w+)\s*;")


@dataclass
class P4Table:
    keys: list[str]
    actions: set[str]
    size: int


@dataclass
class P4Program:
    """The declarations of a P4 program's files, by name."""

    constants: dict[str, int] = field(default_factory=dict)
    registers: dict[str, tuple[int, int]] = field(default_factory=dict)    # name -> (bits, cells)
    counters: dict[str, int] = field(default_factory=dict)                 # name -> cells
    actions: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # name -> [(param, bits)]
    tables: dict[str, P4Table] = field(default_factory=dict)


def _number(text: str, constants: dict[str, int]) -> int:
    if text in constants:
        return constants[text]
    return int(text, 0)


def _block(source: str, start: int) -> str:
    """The text from ``start`` (just inside an opening brace) to its matching closing brace."""
    depth = 1
    for i in range(start, len(source)):
        depth += {"{": 1, "}": -1}.get(source[i], 0)
        if depth == 0:
            return source[start:i]
    raise ValueError("unbalanced braces in the P4 source")


def read_program(texts: list[str]) -> P4Program:
    """The declarations in ``texts`` (the program's files, in any order)."""
    source = "\n".join(re.sub(r"/\*.*?\*/|//[^\n]*", "", t, flags=re.S) for t in texts)
    prog = P4Program()
    for name, value in CONST.findall(source) + DEFINE.findall(source):
        prog.constants[name] = int(value, 0)
    types = {name: int(bits) for bits, name in TYPEDEF.findall(source)}
    for bits, size, name in REGISTER.findall(source):
        prog.registers[name] = (int(bits), _number(size, prog.constants))
    for size, name in COUNTER.findall(source):
        prog.counters[name] = _number(size, prog.constants)
    for name, params in ACTION.findall(source):
        parsed = []
        for param in filter(None, (p.strip() for p in params.split(","))):
            kind, pname = param.rsplit(None, 1)
            width = re.fullmatch(r"bit<(\d+)>", kind)
            parsed.append((pname, int(width.group(1)) if width else types[kind]))
        prog.actions[name] = parsed
    for match in TABLE.finditer(source):
        name, body = match.group(1), _block(source, match.end())
        listed = ACTIONS_LIST.search(body).group(1)
        actions = {a.replace("@defaultonly", "").strip() for a in listed.split(";")} - {"", "NoAction"}
        prog.tables[name] = P4Table(KEY_NAME.findall(body), actions,
                                    _number(SIZE.search(body).group(1), prog.constants))
    return prog


def read_folder(folder: Path) -> P4Program:
    """The program of every ``*.p4`` file directly in ``folder`` (``p4/``, not its baseline)."""
    return read_program([path.read_text() for path in sorted(folder.glob("*.p4"))])
