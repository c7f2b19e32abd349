"""The control plane: installs a splitter plan through a switch's control API.

Any object with the contract's method names (``contract.SwitchAPI``) works:
the embedded model in process, the embedded switch's client, or bmv2's.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

from testbed.dataplane.contract import DROP_CODES, REGISTERS, SCHEMA, SwitchAPI, drop_counter_index
from testbed.semantics.plan import SplitterPlan


class Controller:
    """Pushes a plan to a switch and reads its counters back."""

    #: Control calls per multicast group: create the group, create its node, associate them.
    CALLS_PER_GROUP = 3

    def __init__(self, api: SwitchAPI):
        self.api = api
        #: mgid -> node handle of every group this controller created, for ``clear``.
        self.nodes: dict[int, int] = {}

    def install(self, plan: SplitterPlan) -> dict[str, float]:
        """Install groups, then tables, on a switch with empty state.

        Groups go first so that no entry ever points at a missing group.
        Returns how long each part took (seconds) and how many control
        calls it made, for the run record and the control-plane experiment.
        """
        t0 = time.perf_counter()
        for group in plan.groups:
            self.api.mc_mgrp_create(group.mgid)
            handle = self.api.mc_node_create(group.mgid, list(group.ports))
            self.api.mc_node_associate(group.mgid, handle)
            self.nodes[group.mgid] = handle
        t1 = time.perf_counter()
        entries = plan.entries()
        for entry in entries:
            self.api.table_add(entry.table, entry.action,
                               [str(v) for v in entry.match], [str(v) for v in entry.params])
        t2 = time.perf_counter()
        return {"groups_s": t1 - t0, "tables_s": t2 - t1, "groups": len(plan.groups), "entries": len(entries),
                "operations": self.CALLS_PER_GROUP * len(plan.groups) + len(entries)}

    def clear(self) -> None:
        """Empty every table and remove the groups ``install`` created, so the
        same switch can take the next plan without a restart.  Nodes go before
        their groups: bmv2 leaves a destroyed group's nodes dangling."""
        for table in SCHEMA:
            self.api.table_clear(table)
        for mgid, handle in self.nodes.items():
            self.api.mc_node_destroy(handle)
            self.api.mc_mgrp_destroy(mgid)
        self.nodes.clear()

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
