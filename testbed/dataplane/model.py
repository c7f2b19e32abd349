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
from typing import Any, NamedTuple, Optional, Sequence

from testbed.dataplane.contract import (
    COUNTERS,
    LATE_STEPS,
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
from testbed.dataplane.wire import (
    ETH_LEN,
    EVENT_LEN,
    EVENT_OFFSET,
    EVENT_STRUCT,
    FLAG_WINDOWS,
    WINDOWS_LEN,
    WINDOWS_STRUCT,
    ipv4_checksum,
    is_event_frame,
    is_heartbeat_frame,
)
from testbed.semantics.windows import BEFORE_ORIGIN, NO_WINDOW, TOO_LATE


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


def step_back(x: int, start: int, newest: int, slide: int, n_ops: int) -> tuple[int, int, int]:
    """STEP_BACK, LATE_STEPS times (slides.p4): from the newest slide back to
    the one holding a late event at ``x``.  Returns that slide's start, its
    newest operator and how many slides back it lies.  Below zero the start
    wraps as a 64-bit register would; the caller then finds the event before
    the origin."""
    back = 0
    for _ in range(LATE_STEPS):
        if x < start:
            start = (start - slide) & U64
            back += 1
            newest = newest - 1 if newest > 0 else n_ops - 1
    return start, newest, back


class WindowParams(NamedTuple):
    """What the window_spec actions write into metadata (window_params_t in headers.p4)."""

    is_count: bool
    slide: int
    full: int
    extra: int
    cap: int
    fixed_origin: int = 0
    origin: int = 0
    lateness: int = 0

    @classmethod
    def of(cls, action: str, params: tuple[int, ...]) -> "WindowParams":
        """set_count_window(slide, full, extra, cap) or set_time_window(..., fixed_origin, origin, lateness)."""
        return cls(action == "set_count_window", *params)


class PreviousParams(NamedTuple):
    """set_previous's action data: the epoch before the one in force, for its
    last windows during a transition (prev_params_t in headers.p4)."""

    slide: int
    full: int
    extra: int
    size: int
    n_ops: int
    tail: int


def old_windows_after(d: int, prev: PreviousParams, begun: int) -> int:
    """How many windows of the previous epoch hold a coordinate ``d`` past the
    boundary: those that started before it and have not ended yet.  Were the
    previous grid to go on, the slide holding ``d`` would open ``k + 1`` more
    windows at or after the boundary; they are not windows, so they are
    taken off what the previous spec counts at that position."""
    if d >= prev.size:
        return 0
    if d < prev.slide:
        k, p = 0, d
    else:
        k, p = shift_subtract_divmod(d, prev.slide)
    c = prev.full + (1 if p < prev.extra else 0) - (k + 1)
    return max(0, min(c, begun))


class Verdict(NamedTuple):
    """The slide tracker's outcome: the windows of the epoch in force ``(w, c)``
    and, during a transition, those of the previous epoch ``(old_w, old_c)``;
    ``window`` and ``old_window`` are the global ids of the newest of each."""

    newest: int
    active: int
    old_newest: int = 0
    old_active: int = 0
    window: int = 0
    old_window: int = 0


class CopyMeta(NamedTuple):
    """What ingress hands every copy of an event for its Windows header
    (copy_meta_t in headers.p4): both epochs' windows, unclamped, with their
    N, and the bank whose positions apply."""

    bank: int
    epoch: int
    verdict: Verdict
    n_ops: int
    old_n_ops: int


@dataclass
class Decision:
    """Ingress outcome for one event: a port, a multicast group, or a drop."""

    port: Optional[int] = None
    mgid: Optional[int] = None
    drop: Optional[str] = None
    copy: Optional[CopyMeta] = None


def copy_back(newest: int, n_ops: int, position: int) -> int:
    """How far back from the event's newest window this copy's newest lies:
    ``(newest - position) mod N`` without division, as egress.p4 does it."""
    return newest - position if newest >= position else newest + n_ops - position


class SplitterPipeline:
    """Registers, tables, PRE and counters of one splitter switch."""

    def __init__(self) -> None:
        self.registers: dict[str, list[int]] = {}
        self.counters: dict[str, list[list[int]]] = {}
        self.tables: dict[str, dict[tuple[int, ...], tuple[str, tuple[int, ...]]]] = {t: {} for t in SCHEMA}
        # Entry handles per table, from 0, as bmv2 numbers them (table_dump shows them).
        self._handles: dict[str, dict[int, tuple[int, ...]]] = {t: {} for t in SCHEMA}
        self._next_handle = {t: 0 for t in SCHEMA}
        self.mc_groups: dict[int, list[int]] = {}          # mgid -> node handles
        self.mc_nodes: dict[int, tuple[int, list[int]]] = {}  # handle -> (rid, ports)
        self._next_node = 0     # node handles are never reused while the switch runs
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

    def table_delete(self, table: str, handle: int) -> None:
        self._table(table)
        try:
            key = self._handles[table].pop(int(handle))
        except KeyError:
            raise KeyError(f"table {table} has no entry with handle {handle}") from None
        del self.tables[table][key]

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
        """MyIngress (forwarding.p4): the bank in force (or the other one, at an
        armed change's boundary), its spec and N, the slide tracker, then one
        of the unicast, multicast and transition tables."""
        switching = self._at_boundary(stream, ts)
        epoch = (self.registers["epoch"][stream] + switching) & 0xFFFFFFFF
        bank = epoch & 1
        spec = self.tables["window_spec"].get((stream, bank))
        n_ops_entry = self.tables["operator_count"].get((stream, bank))
        prev = None
        if switching or self.registers["in_transition"][stream]:
            prev_entry = self.tables["previous_spec"].get((stream,))
            if prev_entry is None:
                return self._drop(stream, UNKNOWN_STREAM, nbytes)
            prev = PreviousParams(*prev_entry[1])
        if spec is None or n_ops_entry is None:
            return self._drop(stream, UNKNOWN_STREAM, nbytes)
        n_ops = n_ops_entry[1][0]
        verdict = self._track(stream, ts, WindowParams.of(*spec), n_ops, prev, switching)
        if isinstance(verdict, str):
            return self._drop(stream, verdict, nbytes)
        self._count("stream_in", stream, nbytes)
        # With N or more windows open every operator is hit once.
        active = min(verdict.active, n_ops)
        old_active = min(verdict.old_active, prev.n_ops) if verdict.old_active else 0
        if old_active == 0:
            hit = self._destination(stream, bank, verdict.newest, active)
        else:
            # Old windows, and new ones unless active is 0: their union.
            newest = verdict.newest if active else 0
            hit = self.tables["handover"].get((stream, verdict.old_newest, old_active, newest, active))
        if hit is None:
            return self._drop(stream, UNKNOWN_STREAM, nbytes)
        action, (value,) = hit
        copy = CopyMeta(bank, epoch, verdict, n_ops, prev.n_ops if verdict.old_active else 0)
        if action == "to_operator":
            return Decision(port=value, copy=copy)
        return Decision(mgid=value, copy=copy)

    def _destination(self, stream: int, bank: int, newest: int, active: int):
        """unicast for one window, multicast for more."""
        if active == 1:
            return self.tables["unicast"].get((stream, bank, newest))
        return self.tables["multicast"].get((stream, bank, newest, active))

    def _at_boundary(self, stream: int, ts: int) -> int:
        """Does this event cross the boundary of an armed change?  Only an
        in-order event that reaches the slide after the newest one does, and
        only once the previous transition is over.  It is decided before the
        spec is looked up (the bank depends on it), so the window kind comes
        from a register the stream's first event set."""
        regs = self.registers
        if not (regs["armed"][stream] and regs["initialized"][stream]) or regs["in_transition"][stream]:
            return 0
        if not regs["time_axis"][stream]:
            x = regs["event_count"][stream]
        elif ts < regs["last_ts"][stream]:
            return 0
        else:
            x = ts
        return 1 if x >= regs["next_start"][stream] else 0

    def _track(self, stream: int, ts: int, win: "WindowParams", n_ops: int,
               prev: Optional[PreviousParams] = None, switching: int = 0) -> "str | Verdict":
        """SlideTracker (slides.p4): read and advance the stream's window state.

        Returns a drop reason, or the verdict: the operator of the newest
        window holding the event and how many windows hold it, for the epoch
        in force and, in a transition, for the previous one.
        """
        regs = self.registers
        first = regs["initialized"][stream] == 0
        late = False
        if win.is_count:
            x = regs["event_count"][stream]
            regs["event_count"][stream] = (x + 1) & U64
            origin = x
        else:
            x = ts
            newest_ts = regs["last_ts"][stream]
            if not first and ts < newest_ts:
                if newest_ts - ts > win.lateness:
                    return TOO_LATE
                late = True
            else:
                regs["last_ts"][stream] = ts
            origin = win.origin if win.fixed_origin else ts
        if first:
            regs["initialized"][stream] = 1
            regs["time_axis"][stream] = 0 if win.is_count else 1
            self._begin_epoch(stream, origin, win.slide, 0)
        start, newest, begun = regs["slide_start"][stream], regs["newest_op"][stream], regs["begun"][stream]
        if switching:
            start, newest, begun = self._switch(stream, start, newest, begun, win.slide, prev)
        window = regs["newest_window"][stream]
        old_newest = old_active = old_window = 0
        if regs["in_transition"][stream]:
            boundary = regs["boundary"][stream]
            if x < boundary:
                # A late event before the boundary lies in previous windows only.
                return self._previous_windows(stream, x, prev)
            old_newest = regs["old_newest"][stream]
            old_window = regs["old_window"][stream]
            old_active = old_windows_after(x - boundary, prev, regs["old_begun"][stream])
            if not late and x >= regs["transition_end"][stream]:
                regs["in_transition"][stream] = 0
        if late:
            # Nothing advances: back from the newest slide to the event's own.
            start, newest, back = step_back(x, start, newest, win.slide, n_ops)
            if back >= begun:
                return BEFORE_ORIGIN
            begun -= back
            window -= back
        elif x < start:
            return BEFORE_ORIGIN
        elif x - start >= win.slide:
            start, newest, begun, window = self._advance(stream, x, start, newest, begun, window, win, n_ops)
        active = win.full + (1 if x - start < win.extra else 0)
        if begun < active:
            active = begun
        if active == 0 and old_active == 0:
            return NO_WINDOW
        return Verdict(newest, active, old_newest, old_active, window, old_window)

    def _begin_epoch(self, stream: int, start: int, slide: int, window: int) -> None:
        """An epoch's first slide: its window ``window`` (a global id) at ``start``, on operator 0."""
        regs = self.registers
        regs["slide_start"][stream], regs["newest_op"][stream], regs["begun"][stream] = start, 0, 1
        regs["next_start"][stream] = (start + slide) & U64
        regs["newest_window"][stream] = window

    def _switch(self, stream: int, start: int, newest: int, begun: int, slide: int,
                prev: PreviousParams) -> tuple[int, int, int]:
        """The armed change takes effect: freeze the previous epoch's newest
        slide, flip the bank and begin the new epoch at the boundary."""
        regs = self.registers
        boundary = regs["next_start"][stream]
        regs["old_start"][stream], regs["old_newest"][stream], regs["old_begun"][stream] = start, newest, begun
        old_window = regs["newest_window"][stream]
        regs["old_window"][stream] = old_window
        regs["boundary"][stream] = boundary
        regs["transition_end"][stream] = (boundary + prev.tail) & U64
        regs["epoch"][stream] = (regs["epoch"][stream] + 1) & 0xFFFFFFFF
        regs["armed"][stream] = 0
        regs["in_transition"][stream] = 1
        # Window ids go on across epochs: the new epoch's first window
        # follows the previous epoch's newest.
        self._begin_epoch(stream, boundary, slide, (old_window + 1) & U64)
        return boundary, 0, 1

    def _previous_windows(self, stream: int, x: int, prev: PreviousParams) -> "str | Verdict":
        """A late event before the boundary: the previous epoch's windows, found
        back from its frozen newest slide as any late event's are."""
        regs = self.registers
        start, newest, back = step_back(x, regs["old_start"][stream], regs["old_newest"][stream],
                                        prev.slide, prev.n_ops)
        begun = regs["old_begun"][stream]
        if back >= begun:
            return BEFORE_ORIGIN
        active = min(begun - back, prev.full + (1 if x - start < prev.extra else 0))
        if active == 0:
            return NO_WINDOW
        return Verdict(0, 0, newest, active, 0, regs["old_window"][stream] - back)

    def _advance(self, stream: int, x: int, start: int, newest: int, begun: int, window: int,
                 win: "WindowParams", n_ops: int) -> tuple[int, int, int, int]:
        """A new slide (or several, after a gap in time) has begun: move the
        stream's state on by the slides passed, with division only after a gap."""
        offset = x - start
        if offset - win.slide < win.slide:
            advanced, offset = 1, offset - win.slide
        else:
            advanced, offset = shift_subtract_divmod(offset, win.slide)
        step = advanced if advanced < n_ops else shift_subtract_divmod(advanced, n_ops)[1]
        newest += step
        if newest >= n_ops:
            newest -= n_ops
        begun = win.cap if advanced >= win.cap or begun + advanced >= win.cap else begun + advanced
        regs = self.registers
        start = x - offset
        regs["slide_start"][stream], regs["newest_op"][stream], regs["begun"][stream] = start, newest, begun
        regs["next_start"][stream] = (start + win.slide) & U64
        window = (window + advanced) & U64
        regs["newest_window"][stream] = window
        return start, newest, begun, window

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
    def process(self, frame: bytes, in_port: int = 0) -> list[tuple[int, bytes]]:
        """Frames to send, as ``(egress port, bytes)``, for one frame received on ``in_port``."""
        if not is_event_frame(frame):
            if is_heartbeat_frame(frame):
                self._count("heartbeats", in_port, len(frame))
            else:
                self._count("non_event", 0, len(frame))
            return []
        stream, _f, _seq, ts, _k, _v = EVENT_STRUCT.unpack_from(frame, EVENT_OFFSET)
        decision = self.ingress(stream, ts, len(frame))
        out = []
        for port in self.replicate(decision):
            rewritten = self.egress(port, frame, self._windows_header(stream, port, decision.copy))
            if rewritten is not None:
                # Counted at the length the frame arrived with, as bmv2
                # counts packet_length before the deparser grows the copy.
                self._count("stream_out", stream, len(frame))
                self._count("operator_out", port, len(frame))
                out.append((port, rewritten))
        return out

    def _windows_header(self, stream: int, port: int, copy: CopyMeta) -> bytes:
        """The Windows header of the copy for ``port`` (egress.p4): the
        event's windows whose operator stands at this port's position, in the
        epoch in force and in the previous one."""
        v = copy.verdict
        window = span = old_window = old_span = 0
        hit = self.tables["operator_position"].get((stream, copy.bank, port))
        if v.active and hit is not None:
            back = copy_back(v.newest, copy.n_ops, hit[1][0])
            if back < v.active:
                window, span = (v.window - back) & U64, v.active - back
        old_hit = self.tables["previous_position"].get((stream, port))
        if v.old_active and old_hit is not None:
            back = copy_back(v.old_newest, copy.old_n_ops, old_hit[1][0])
            if back < v.old_active:
                old_window, old_span = (v.old_window - back) & U64, v.old_active - back
        return WINDOWS_STRUCT.pack(window, span, copy.n_ops & 0xFFFF, copy.epoch & 0xFFFF,
                                   old_window, old_span, copy.old_n_ops & 0xFFFF, 0)

    def egress(self, port: int, frame: bytes, windows: Optional[bytes] = None) -> Optional[bytes]:
        """MyEgress: address the copy to the host behind ``port`` and, for a
        copy of an event, insert its Windows header after the event header."""
        hit = self.tables["egress_rewrite"].get((port,))
        if hit is None:
            return None
        mac, ip = hit[1]
        buf = bytearray(frame)
        if windows is not None:
            at = EVENT_OFFSET + EVENT_LEN
            buf[at:at] = windows
            flags_at = EVENT_OFFSET + 2
            struct.pack_into("!H", buf, flags_at, struct.unpack_from("!H", buf, flags_at)[0] | FLAG_WINDOWS)
            for length_at in (ETH_LEN + 2, ETH_LEN + IPV4_UDP_LENGTH):
                struct.pack_into("!H", buf, length_at,
                                 (struct.unpack_from("!H", buf, length_at)[0] + WINDOWS_LEN) & 0xFFFF)
        buf[0:6] = mac.to_bytes(6, "big")
        buf[ETH_LEN + 16:ETH_LEN + 20] = ip.to_bytes(4, "big")
        buf[ETH_LEN + 10:ETH_LEN + 12] = b"\0\0"
        struct.pack_into("!H", buf, ETH_LEN + 10, ipv4_checksum(bytes(buf[ETH_LEN:ETH_LEN + 20])))
        buf[ETH_LEN + 26:ETH_LEN + 28] = b"\0\0"   # UDP checksum: none
        return bytes(buf)


#: Offset of the UDP length field from the start of the IPv4 header.
IPV4_UDP_LENGTH = 20 + 4


def _fitting(value: int, bits: int, what: str) -> int:
    to_bytes(value, bits, what)    # raises ValueError naming ``what`` when it does not fit
    return value


class _SparseCounter(dict):
    """A large counter array that allocates cells on first use."""

    def __missing__(self, index: int) -> list[int]:
        cell = [0, 0]
        self[index] = cell
        return cell
