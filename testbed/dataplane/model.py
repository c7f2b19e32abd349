"""A data-plane model of the splitter: the embedded target's pipeline.

It implements the contract of ``testbed.dataplane.contract`` and mirrors
``p4/splitter.p4`` stage by stage: registers indexed by stream,
exact-match tables filled only through the control API, a packet replication
engine, and counters.  It takes no shortcut through ``testbed.semantics.windows``; the
tests hold it to that oracle.

The control API uses p4-utils' names (``table_add``, ``mc_mgrp_create``,
``mc_node_create``, ``mc_node_associate``, ``register_read``,
``register_reset``, ``counter_read``) so one controller drives this model and
bmv2 alike.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from testbed.dataplane.contract import (
    COUNTERS,
    N_STREAMS,
    REGISTERS,
    SCHEMA,
    U64,
    UNKNOWN_STREAM,
    TableSpec,
    drop_counter_index,
    to_bytes,
    to_int,
)
from testbed.dataplane.wire import ETH_LEN, EVENT_OFFSET, EVENT_STRUCT, ipv4_checksum, is_event_frame
from testbed.semantics.windows import BEFORE_ORIGIN, NO_WINDOW, OUT_OF_ORDER


def shift_subtract_divmod(dividend: int, divisor: int) -> tuple[int, int]:
    """64-bit unsigned ``divmod`` by shifting and subtracting, as the P4 program
    does it (v1model targets have no run-time division).  ``(d >> i) >= divisor``
    tests ``d >= divisor << i`` without overflowing."""
    quotient, rest = 0, dividend
    for i in range(63, -1, -1):
        if (rest >> i) >= divisor:
            rest -= divisor << i
            quotient |= 1 << i
    return quotient, rest


@dataclass
class Decision:
    """Ingress outcome for one event: a port, a multicast group, or a drop."""

    port: Optional[int] = None
    mgid: Optional[int] = None
    drop: Optional[str] = None


class SplitterPipeline:
    """Registers, tables, PRE and counters of one splitter switch."""

    def __init__(self) -> None:
        self.registers: dict[str, list[int]] = {}
        self.counters: dict[str, list[list[int]]] = {}
        self.tables: dict[str, dict[tuple[int, ...], tuple[str, tuple[int, ...]]]] = {t: {} for t in SCHEMA}
        self._handles: dict[str, dict[int, tuple[int, ...]]] = {t: {} for t in SCHEMA}
        self._next_handle = 0
        self.mc_groups: dict[int, list[int]] = {}          # mgid -> node handles
        self.mc_nodes: dict[int, tuple[int, list[int]]] = {}  # handle -> (rid, ports)
        for name in REGISTERS:
            self.registers[name] = [0] * N_STREAMS
        for name, size in COUNTERS.items():
            self.counters[name] = [[0, 0] for _ in range(size)] if size < 4096 else _SparseCounter()

    # ------------------------------------------------------------------
    # control API (p4-utils names)
    # ------------------------------------------------------------------
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
        key = tuple(_fitting(to_int(k), bits, f"{table} key") for k, bits in zip(match_keys, spec.key_bits))
        if key in self.tables[table]:
            raise ValueError(f"duplicate entry in {table} for key {key}")
        params = tuple(_fitting(to_int(v, kind), bits, f"{action}({name})")
                       for (name, kind), bits, v in zip(aspec.params, aspec.bits, action_params))
        self.tables[table][key] = (action, params)
        handle = self._next_handle
        self._next_handle += 1
        self._handles[table][handle] = key
        return handle

    def table_delete(self, table: str, handle: int) -> None:
        key = self._handles[table].pop(handle)
        del self.tables[table][key]

    def table_clear(self, table: str) -> None:
        self._table(table)
        self.tables[table].clear()
        self._handles[table].clear()

    def table_entries(self, table: str) -> list[dict[str, Any]]:
        """Read back a table: ``[{"match": [...], "action": ..., "params": [...]}]``."""
        self._table(table)
        return [{"match": list(k), "action": a, "params": list(p)}
                for k, (a, p) in sorted(self.tables[table].items())]

    def mc_mgrp_create(self, mgid: int) -> int:
        if mgid in self.mc_groups:
            raise ValueError(f"multicast group {mgid} exists")
        self.mc_groups[int(mgid)] = []
        return int(mgid)

    def mc_node_create(self, rid: int, ports: Sequence[int]) -> int:
        handle = len(self.mc_nodes)
        self.mc_nodes[handle] = (int(rid), [int(p) for p in ports])
        return handle

    def mc_node_associate(self, mgid: int, handle: int) -> None:
        self.mc_groups[int(mgid)].append(int(handle))

    def mc_dump(self) -> dict[int, list[tuple[int, list[int]]]]:
        """``mgid -> [(rid, ports), ...]``."""
        return {g: [self.mc_nodes[h] for h in hs] for g, hs in sorted(self.mc_groups.items())}

    def register_read(self, name: str, index: Optional[int] = None):
        reg = self._register(name)
        return list(reg) if index is None else reg[int(index)]

    def register_write(self, name: str, index: int, value: int) -> None:
        width = REGISTERS[name]
        self._register(name)[int(index)] = int(value) & ((1 << width) - 1)

    def register_reset(self, name: str) -> None:
        reg = self._register(name)
        for i in range(len(reg)):
            reg[i] = 0

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        """``(bytes, packets)`` as bmv2 reports them."""
        c = self.counters[name][int(index)]
        return c[0], c[1]

    def counter_reset(self, name: str) -> None:
        size = COUNTERS[name]
        self.counters[name] = [[0, 0] for _ in range(size)] if size < 4096 else _SparseCounter()

    def _table(self, name: str) -> TableSpec:
        try:
            return SCHEMA[name]
        except KeyError:
            raise KeyError(f"no table named {name}") from None

    def _register(self, name: str) -> list[int]:
        try:
            return self.registers[name]
        except KeyError:
            raise KeyError(f"no register named {name}") from None

    def _count(self, counter: str, index: int, nbytes: int) -> None:
        c = self.counters[counter][index]
        c[0] += nbytes
        c[1] += 1

    # ------------------------------------------------------------------
    # ingress: window state and the destination decision
    # ------------------------------------------------------------------
    def ingress(self, stream: int, ts: int, nbytes: int = 0) -> Decision:
        spec = self.tables["window_spec"].get((stream,))
        n_ops_entry = self.tables["operator_count"].get((stream,))
        if spec is None or n_ops_entry is None:
            return self._drop(stream, UNKNOWN_STREAM, nbytes)
        action, params = spec
        n_ops = n_ops_entry[1][0]
        regs = self.registers
        first = regs["initialized"][stream] == 0
        if action == "set_count_window":
            slide, full, extra, cap = params
            x = regs["event_count"][stream]
            regs["event_count"][stream] = (x + 1) & U64
            origin = x
        else:
            slide, full, extra, cap, fixed_origin, origin = params
            x = ts
            if not first and ts < regs["last_ts"][stream]:
                return self._drop(stream, OUT_OF_ORDER, nbytes)
            regs["last_ts"][stream] = ts
            if not fixed_origin:
                origin = ts
        if first:
            regs["initialized"][stream] = 1
            regs["slide_start"][stream] = origin
            regs["newest_op"][stream] = 0
            regs["begun"][stream] = 1
        start = regs["slide_start"][stream]
        if x < start:
            return self._drop(stream, BEFORE_ORIGIN, nbytes)
        offset = x - start
        if offset >= slide:
            # A new slide (or several, after a gap in time) has begun.
            if offset - slide < slide:
                advanced, offset = 1, offset - slide
            else:
                advanced, offset = shift_subtract_divmod(offset, slide)
            regs["slide_start"][stream] = x - offset
            step = advanced if advanced < n_ops else shift_subtract_divmod(advanced, n_ops)[1]
            newest = regs["newest_op"][stream] + step
            regs["newest_op"][stream] = newest - n_ops if newest >= n_ops else newest
            begun = regs["begun"][stream]
            regs["begun"][stream] = cap if advanced >= cap or begun + advanced >= cap else begun + advanced
        active = full + (1 if offset < extra else 0)
        begun = regs["begun"][stream]
        if begun < active:
            active = begun
        if active == 0:
            return self._drop(stream, NO_WINDOW, nbytes)
        self._count("stream_in", stream, nbytes)
        if active > n_ops:
            active = n_ops
        newest = regs["newest_op"][stream]
        if active == 1:
            hit = self.tables["unicast"].get((stream, newest))
            if hit is None:
                return self._drop(stream, UNKNOWN_STREAM, nbytes)
            return Decision(port=hit[1][0])
        hit = self.tables["multicast"].get((stream, newest, active))
        if hit is None:
            return self._drop(stream, UNKNOWN_STREAM, nbytes)
        return Decision(mgid=hit[1][0])

    def _drop(self, stream: int, reason: str, nbytes: int) -> Decision:
        self._count("stream_drops", drop_counter_index(stream, reason), nbytes)
        return Decision(drop=reason)

    def replicate(self, decision: Decision) -> list[int]:
        """Egress ports for a decision (the PRE's job for multicast)."""
        if decision.port is not None:
            return [decision.port]
        if decision.mgid is not None:
            ports: list[int] = []
            for handle in self.mc_groups.get(decision.mgid, ()):
                ports.extend(self.mc_nodes[handle][1])
            return ports
        return []

    # ------------------------------------------------------------------
    # the whole switch on one frame
    # ------------------------------------------------------------------
    def process(self, frame: bytes) -> list[tuple[int, bytes]]:
        """Frames to send, as ``(egress port, bytes)``, for one received frame."""
        if not is_event_frame(frame):
            self._count("non_event", 0, len(frame))
            return []
        stream, _f, _seq, ts, _k, _v = EVENT_STRUCT.unpack_from(frame, EVENT_OFFSET)
        decision = self.ingress(stream, ts, len(frame))
        out = []
        for port in self.replicate(decision):
            rewritten = self.egress(port, frame)
            if rewritten is not None:
                self._count("stream_out", stream, len(rewritten))
                self._count("operator_out", port, len(rewritten))
                out.append((port, rewritten))
        return out

    def egress(self, port: int, frame: bytes) -> Optional[bytes]:
        hit = self.tables["egress_rewrite"].get((port,))
        if hit is None:
            return None
        mac, ip = hit[1]
        buf = bytearray(frame)
        buf[0:6] = mac.to_bytes(6, "big")
        buf[ETH_LEN + 16:ETH_LEN + 20] = ip.to_bytes(4, "big")
        buf[ETH_LEN + 10:ETH_LEN + 12] = b"\0\0"
        struct.pack_into("!H", buf, ETH_LEN + 10, ipv4_checksum(bytes(buf[ETH_LEN:ETH_LEN + 20])))
        buf[ETH_LEN + 26:ETH_LEN + 28] = b"\0\0"   # UDP checksum: none
        return bytes(buf)


def _fitting(value: int, bits: int, what: str) -> int:
    to_bytes(value, bits, what)    # raises ValueError naming ``what`` when it does not fit
    return value


class _SparseCounter(dict):
    """A large counter array that allocates cells on first use."""

    def __missing__(self, index: int) -> list[int]:
        cell = [0, 0]
        self[index] = cell
        return cell
