"""The switch's state and its control API (p4/state.p4, and what bmv2's runtime serves).

Registers indexed by stream, exact-match tables filled only through the
control API, the packet replication engine's groups and nodes, and
counters.  The control API uses p4-utils' names (``table_add``,
``mc_mgrp_create``, ``mc_node_create``, ``mc_node_associate``,
``register_read``, ``register_reset``, ``counter_read``), so one controller
drives this model and bmv2 alike.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from testbed.dataplane.contract import (
    ALL_COUNTERS,
    ALL_REGISTER_WIDTHS,
    ALL_TABLES,
    CEP_REGISTERS,
    FIXED_REGISTERS,
    N_STREAMS,
    REGISTERS,
    TableSpec,
    to_bytes,
    to_int,
)

#: The registers that switch a CEP window or pattern slot on or off.
_CEP_SWITCHES = ("cep_window_size", "cep_pattern_on")


class ControlState:
    """Registers, tables, PRE, mirror sessions and counters of one splitter switch,
    behind the control API.  The model holds the CEP stage's state too: it is
    one target with every feature, where bmv2 runs the build a topology needs."""

    def __init__(self) -> None:
        self.registers: dict[str, list[int]] = {}
        self.counters: dict[str, list[list[int]]] = {}
        self.tables: dict[str, dict[tuple[int, ...], tuple[str, tuple[int, ...]]]] = {t: {} for t in ALL_TABLES}
        # Entry handles per table, from 0, as bmv2 numbers them (table_dump shows them).
        self._handles: dict[str, dict[int, tuple[int, ...]]] = {t: {} for t in ALL_TABLES}
        self._next_handle = {t: 0 for t in ALL_TABLES}
        self.mc_groups: dict[int, list[int]] = {}          # mgid -> node handles
        self.mc_nodes: dict[int, tuple[int, list[int]]] = {}  # handle -> (rid, ports)
        self._next_node = 0     # node handles are never reused while the switch runs
        self.mirror_sessions: dict[int, int] = {}           # session -> mgid
        #: Whether any CEP window or pattern slot is in use: the stage does
        #: nothing otherwise, and the model then skips it (it costs Python time).
        self.cep_on = False
        for name in (*REGISTERS, *FIXED_REGISTERS):
            self.registers[name] = [0] * N_STREAMS
        for name, (_bits, cells) in CEP_REGISTERS.items():
            self.registers[name] = [0] * cells
        for name, size in ALL_COUNTERS.items():
            self.counters[name] = [[0, 0] for _ in range(size)] if size < 4096 else _SparseCounter()

    def table_add(self, table: str, action: str, match_keys: Sequence[Any],
                  action_params: Sequence[Any] = ()) -> int:
        spec = self._table(table)
        if action not in spec.actions:
            raise KeyError(f"table {table} has no action {action}")
        if len(match_keys) != len(spec.keys):
            raise ValueError(f"table {table} takes {len(spec.keys)} match keys, got {len(match_keys)}")
        aspec = spec.actions[action]
        if len(action_params) != len(aspec.params):
            raise ValueError(f"action {action} takes {len(aspec.params)} parameters, got {len(action_params)}")
        # Values wider than their P4 field are refused, as bmv2's client does.
        key = tuple(_fitting(to_int(k), field.width, f"{table} key") for k, field in zip(match_keys, spec.keys))
        if key in self.tables[table]:
            raise ValueError(f"duplicate entry in {table} for key {key}")
        params = tuple(_fitting(to_int(v, p.kind), p.width, f"{action}({p.name})")
                       for p, v in zip(aspec.params, action_params))
        self.tables[table][key] = (action, params)
        handle = self._next_handle[table]
        self._next_handle[table] += 1
        self._handles[table][handle] = key
        return handle

    def table_add_many(self, entries: Sequence[Sequence[Any]]) -> list[int]:
        return [self.table_add(*entry) for entry in entries]

    def table_delete(self, table: str, handle: int) -> None:
        self._table(table)
        try:
            key = self._handles[table].pop(int(handle))
        except KeyError:
            raise KeyError(f"table {table} has no entry with handle {handle}") from None
        del self.tables[table][key]

    def takes_changes(self) -> bool:
        return True

    def held_tables(self) -> list[str]:
        """Every table: the model stands for every build of the program."""
        return list(self.tables)

    def table_clear(self, table: str) -> None:
        self._table(table)
        self.tables[table].clear()
        self._handles[table].clear()

    def table_entries(self, table: str) -> list[dict[str, Any]]:
        """Read back a table: ``[{"handle", "match": [...], "action": ..., "params": [...]}]``."""
        self._table(table)
        handle_of = {key: handle for handle, key in self._handles[table].items()}
        return [{"handle": handle_of[k], "match": list(k), "action": a, "params": list(p)}
                for k, (a, p) in sorted(self.tables[table].items())]

    def mc_mgrp_create(self, mgid: int) -> int:
        if mgid in self.mc_groups:
            raise ValueError(f"multicast group {mgid} exists")
        self.mc_groups[int(mgid)] = []
        return int(mgid)

    def mc_node_create(self, rid: int, ports: Sequence[int]) -> int:
        handle = self._next_node
        self._next_node += 1
        self.mc_nodes[handle] = (int(rid), [int(p) for p in ports])
        return handle

    def mc_node_associate(self, mgid: int, handle: int) -> None:
        self.mc_groups[int(mgid)].append(int(handle))

    def mc_mgrp_create_many(self, groups: Sequence[Sequence[Any]]) -> list[list[int]]:
        made: list[list[int]] = []
        for mgid, nodes in groups:
            self.mc_mgrp_create(mgid)
            made.append([])
            for rid, ports in nodes:
                made[-1].append(self.mc_node_create(rid, ports))
                self.mc_node_associate(mgid, made[-1][-1])
        return made

    def mc_node_destroy(self, handle: int) -> None:
        if int(handle) not in self.mc_nodes:
            raise KeyError(f"no multicast node with handle {handle}")
        del self.mc_nodes[int(handle)]
        for nodes in self.mc_groups.values():
            if int(handle) in nodes:
                nodes.remove(int(handle))

    def mc_mgrp_destroy(self, mgid: int) -> None:
        if int(mgid) not in self.mc_groups:
            raise KeyError(f"no multicast group {mgid}")
        del self.mc_groups[int(mgid)]

    def mc_dump(self) -> dict[int, list[dict[str, Any]]]:
        """``mgid -> [{"handle", "rid", "ports"}, ...]``."""
        return {g: [{"handle": h, "rid": self.mc_nodes[h][0], "ports": sorted(self.mc_nodes[h][1])} for h in hs]
                for g, hs in sorted(self.mc_groups.items())}

    def mirroring_add_mc(self, session: int, mgid: int) -> None:
        self.mirror_sessions[int(session)] = int(mgid)

    def register_read(self, name: str, index: Optional[int] = None):
        reg = self._register(name)
        return list(reg) if index is None else reg[int(index)]

    def register_write(self, name: str, index: int, value: int) -> None:
        width = ALL_REGISTER_WIDTHS[name]
        self._register(name)[int(index)] = int(value) & ((1 << width) - 1)
        if name in _CEP_SWITCHES:
            self._cep_in_use()

    def register_reset(self, name: str) -> None:
        reg = self._register(name)
        for i in range(len(reg)):
            reg[i] = 0
        if name in _CEP_SWITCHES:
            self._cep_in_use()

    def _cep_in_use(self) -> None:
        self.cep_on = any(self.registers["cep_window_size"]) or any(self.registers["cep_pattern_on"])

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        """``(bytes, packets)`` as bmv2 reports them."""
        c = self.counters[name][int(index)]
        return c[0], c[1]

    def counter_reset(self, name: str) -> None:
        size = ALL_COUNTERS[name]
        self.counters[name] = [[0, 0] for _ in range(size)] if size < 4096 else _SparseCounter()

    def _table(self, name: str) -> TableSpec:
        try:
            return ALL_TABLES[name]
        except KeyError:
            raise KeyError(f"no table named {name}") from None

    def _register(self, name: str) -> list[int]:
        try:
            return self.registers[name]
        except KeyError:
            raise KeyError(f"no register named {name}") from None

    def _count(self, counter: str, index: int, nbytes: int, packets: int = 1) -> None:
        """``packets`` more packets of ``nbytes`` each in a counter cell, as bmv2 counts them."""
        c = self.counters[counter][index]
        c[0] += nbytes * packets
        c[1] += packets

    def _hit(self, table: str, key: tuple, kept: Optional[dict] = None):
        """A table's hit for ``key`` (None on a miss), remembered in ``kept``
        when given: a packet applies each table once, whatever it carries."""
        if kept is None:
            return self.tables[table].get(key)
        try:
            return kept[(table, key)]
        except KeyError:
            hit = kept[(table, key)] = self.tables[table].get(key)
            return hit

def _fitting(value: int, bits: int, what: str) -> int:
    if value < 0 or value >> bits:
        to_bytes(value, bits, what)    # raises ValueError naming ``what``
    return value



class _SparseCounter(dict):
    """A large counter array that allocates cells on first use."""

    def __missing__(self, index: int) -> list[int]:
        cell = [0, 0]
        self[index] = cell
        return cell
