"""The control plane: installs a splitter plan through a switch's control API.

Any object with the contract's method names (``contract.SwitchAPI``) works:
the embedded model in process, the embedded switch's client, or bmv2's.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from testbed.dataplane.contract import DROP_CODES, REGISTERS, SCHEMA, SwitchAPI, drop_counter_index
from testbed.semantics.plan import BANKED, TRANSITION, MulticastGroup, SplitterPlan, TableEntry
from testbed.semantics.topology import Stream


class ChangeTimeout(RuntimeError):
    """A stream did not reach the point a change waits for in time."""


class ChangeRefused(RuntimeError):
    """The switch runs a build that takes no change mid-stream."""


@dataclass
class Change:
    """One reconfiguration of one stream, from installing it to its boundary."""

    stream: int
    new: Stream
    epoch: int                      # the epoch the change begins
    armed_at: float                 # time.time() when the data plane was armed
    install_s: float                # control-plane time to install the other bank and arm it
    operations: int                 # control calls that took
    boundary: Optional[int] = None  # where the epoch began on the axis, once it did
    applied_at: Optional[float] = None
    timings: dict[str, float] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The change as run.json keeps it (``Stream.recorded_changes``)."""
        return {"boundary": self.boundary, "epoch": self.epoch, "window": self.new.window.as_json(),
                "operators": list(self.new.operators), "armed_at": self.armed_at,
                "applied_at": self.applied_at, "install_s": self.install_s, "operations": self.operations}


def group_calls(group: MulticastGroup) -> int:
    """Control calls that create ``group``: the group, then each node created and associated."""
    return 1 + 2 * len(group.nodes)


class Controller:
    """Pushes a plan to a switch and reads its counters back."""

    #: Control calls per multicast group of one node: create the group, create its node, associate them.
    CALLS_PER_GROUP = 3

    #: How often ``change`` polls the switch while it waits for a stream.
    POLL_S = 0.005

    def __init__(self, api: SwitchAPI):
        self.api = api
        #: mgid -> node handles of every group this controller created, for ``clear``.
        self.nodes: dict[int, list[int]] = {}
        #: (table, match) -> entry handle, so that a change can replace a bank.
        self.handles: dict[tuple[str, tuple[int, ...]], int] = {}
        #: stream id -> the configuration in force (or armed), for the next change.
        self.streams: dict[int, Stream] = {}
        #: The tables the switch's build holds, asked once.
        self._tables: Optional[frozenset[str]] = None

    def install(self, plan: SplitterPlan) -> dict[str, float]:
        """Install groups, then tables, on a switch with empty state.

        Groups go first so that no entry ever points at a missing group.
        Returns how long each part took (seconds) and how many control
        calls it made, for the run record and the control-plane experiment.
        """
        t0 = time.perf_counter()
        self._create_groups(plan.groups)
        t1 = time.perf_counter()
        entries = self._held(plan.entries())
        self._add_all(entries)
        t2 = time.perf_counter()
        self.streams.update({sid: sp.stream for sid, sp in plan.streams.items()})
        return {"groups_s": t1 - t0, "tables_s": t2 - t1, "groups": len(plan.groups), "entries": len(entries),
                "operations": sum(map(group_calls, plan.groups)) + len(entries)}

    def fork(self, api: SwitchAPI) -> "Controller":
        """A controller of the same switch over another connection, knowing
        what this one installed (groups, entry handles, configurations)."""
        other = Controller(api)
        other.nodes = {mgid: list(handles) for mgid, handles in self.nodes.items()}
        other.handles, other.streams = dict(self.handles), dict(self.streams)
        return other

    def _create_groups(self, groups: Sequence[MulticastGroup]) -> int:
        """Create the groups this switch does not have yet, each with its nodes; returns the calls made."""
        new = [group for group in groups if group.mgid not in self.nodes]
        try:
            made = self.api.mc_mgrp_create_many([(g.mgid, [(rid, list(ports)) for rid, ports in g.nodes])
                                                 for g in new])
        except Exception:
            # Part of the groups may be on the switch: learn them from there, so ``clear`` removes them.
            wanted = {g.mgid for g in new}
            self.nodes.update((mgid, [n["handle"] for n in nodes])
                              for mgid, nodes in self.api.mc_dump().items() if mgid in wanted)
            raise
        for group, handles in zip(new, made):
            self.nodes[group.mgid] = [int(h) for h in handles]
        return sum(map(group_calls, new))

    def held_tables(self) -> frozenset[str]:
        """The tables the switch's build holds, asked once: a plan fills every
        build's (operator_back for bmv2's build without changes,
        operator_position for the others, and the model holds both)."""
        if self._tables is None:
            self._tables = frozenset(self.api.held_tables())
        return self._tables

    def _held(self, entries: Sequence[TableEntry]) -> list[TableEntry]:
        """The entries of tables the switch's build holds."""
        held = self.held_tables()
        return [e for e in entries if e.table in held]

    #: Entries handed to ``table_add_many`` at once: one request to the embedded switch.
    BATCH = 2048

    def _add_all(self, entries: Sequence[TableEntry]) -> None:
        """Add ``entries`` in order, in batches (``SwitchAPI.table_add_many``)."""
        for start in range(0, len(entries), self.BATCH):
            batch = entries[start:start + self.BATCH]
            # Values go as the plan holds them (ints, and MACs and IPs as text): every target reads both.
            handles = self.api.table_add_many([(e.table, e.action, list(e.match), list(e.params)) for e in batch])
            for entry, handle in zip(batch, handles):
                self.handles[(entry.table, tuple(int(v) for v in entry.match))] = int(handle)

    def _delete_where(self, keep) -> int:
        """Delete the entries this controller added whose (table, match) ``keep`` refuses."""
        doomed = [key for key in self.handles if not keep(*key)]
        for table, match in doomed:
            self.api.table_delete(table, self.handles.pop((table, match)))
        return len(doomed)

    # ------------------------------------------------------------------
    # reconfiguration at run time (docs/p4.md, "Reconfiguration")
    # ------------------------------------------------------------------
    def settled(self, stream: int) -> bool:
        """No change waits for its boundary and no transition is under way:
        the bank not in force is free for the next change."""
        return not (self.api.register_read("armed", stream) or self.api.register_read("in_transition", stream))

    def wait_settled(self, stream: int, timeout: float = 10.0) -> float:
        """Wait until ``settled``; returns how long that took (seconds)."""
        return self._wait(lambda: self.settled(stream), timeout,
                          f"stream {stream}: the previous change's transition is still under way")

    def change(self, plan: SplitterPlan, new: Stream, timeout: float = 10.0) -> Change:
        """Install ``new`` in the bank not in force and arm it.

        The data plane itself makes it the configuration in force at the
        stream's next window boundary, so no event is lost and no window is
        split, whatever the traffic does meanwhile.  A stream serves two
        configurations at once, so this first waits until the previous
        change's transition is over.  Other streams are not touched.
        """
        sid = new.id
        if not self.api.takes_changes():
            raise ChangeRefused(f"stream {sid}: the switch runs the build without changes mid-stream, chosen "
                                f"because the topology schedules no change and has no failover or elastic "
                                f"policy (docs/p4.md, \"A build without changes\")")
        waited = self.wait_settled(sid, timeout)
        t0 = time.perf_counter()
        epoch = int(self.api.register_read("epoch", sid))
        bank = (epoch + 1) & 1
        prepared = plan.change(self.streams[sid], new, bank)
        deleted = self._delete_where(lambda table, match: match[0] != sid or not (
            table in TRANSITION or (table in BANKED and match[1] == bank)))
        group_ops = self._create_groups(sorted(prepared.groups.values(), key=lambda g: g.mgid))
        # An operator set's entries stay for every stream that names it: add
        # what the new configuration reaches and the switch does not hold yet.
        missing = [e for e in self._held(prepared.entries)
                   if (e.table, tuple(int(v) for v in e.match)) not in self.handles]
        self._add_all(missing)
        armed_at = time.time()      # the write below arms it somewhere in its round trip
        self.api.register_write("armed", sid, 1)
        install_s = time.perf_counter() - t0
        self.streams[sid] = new
        ops = deleted + group_ops + len(missing) + 3
        return Change(sid, new, epoch + 1, armed_at, install_s, ops, timings={"waited_s": waited})

    def wait_applied(self, change: Change, timeout: float = 10.0) -> Change:
        """Wait for the change's boundary: the data plane clears ``armed`` when
        an event crosses it.  Fills in where and when."""
        self._wait(lambda: not self.api.register_read("armed", change.stream), timeout,
                   f"stream {change.stream}: no event reached the change's boundary")
        change.applied_at = time.time()
        change.boundary = int(self.api.register_read("boundary", change.stream))
        return change

    def _wait(self, done, timeout: float, what: str) -> float:
        t0 = time.perf_counter()
        while not done():
            if time.perf_counter() - t0 > timeout:
                raise ChangeTimeout(f"{what} after {timeout:g} s")
            time.sleep(self.POLL_S)
        return time.perf_counter() - t0

    def clear(self) -> None:
        """Empty every table and remove the groups ``install`` created, so the
        same switch can take the next plan without a restart.  Nodes go before
        their groups: bmv2 leaves a destroyed group's nodes dangling."""
        held = self.held_tables()
        for table in SCHEMA:
            if table in held:
                self.api.table_clear(table)
        for mgid, handles in self.nodes.items():
            for handle in handles:
                self.api.mc_node_destroy(handle)
            self.api.mc_mgrp_destroy(mgid)
        self.nodes.clear()
        self.handles.clear()
        self.streams.clear()

    def reset_window_state(self) -> None:
        """Forget every stream's window progress (needed after N or a spec changes)."""
        for name in REGISTERS:
            self.api.register_reset(name)

    def stream_counters(self, stream_ids: Sequence[int], ports: Sequence[int]) -> dict[str, Any]:
        """Per-stream accepted/sent/dropped packet counts and per-port sent counts."""
        out: dict[str, Any] = {"streams": {}, "ports": {}}
        for sid in stream_ids:
            drops = {reason: self.api.counter_read("stream_drops", drop_counter_index(sid, reason))[1]
                     for reason in DROP_CODES}
            out["streams"][sid] = {
                "in": self.api.counter_read("stream_in", sid)[1],
                "out": self.api.counter_read("stream_out", sid)[1],
                "dropped": drops,
            }
        for port in ports:
            out["ports"][port] = self.api.counter_read("operator_out", port)[1]
        out["non_event"] = self.api.counter_read("non_event", 0)[1]
        return out
