"""The control plane: installs a splitter plan through a switch's control API.

Any object with p4-utils' method names works as the API: the embedded
target's pipeline (in process, or through ``testbed.targets.embedded``'s
client), or bmv2 through ``testbed.targets.bmv2``.
"""
from __future__ import annotations

import time
from typing import Any, Protocol, Sequence

from .pipeline import DROP_CODES, DROP_SLOTS, REGISTERS
from .plan import SplitterPlan


class SwitchAPI(Protocol):
    def table_add(self, table: str, action: str, match_keys: Sequence[Any],
                  action_params: Sequence[Any] = ()) -> int: ...
    def table_clear(self, table: str) -> None: ...
    def mc_mgrp_create(self, mgid: int) -> Any: ...
    def mc_node_create(self, rid: int, ports: Sequence[int]) -> int: ...
    def mc_node_associate(self, mgid: int, handle: int) -> None: ...
    def register_read(self, name: str, index: Any = None) -> Any: ...
    def register_reset(self, name: str) -> None: ...
    def counter_read(self, name: str, index: int) -> tuple[int, int]: ...


class Controller:
    """Pushes a plan to a switch and reads its counters back."""

    def __init__(self, api: SwitchAPI):
        self.api = api

    def install(self, plan: SplitterPlan) -> dict[str, float]:
        """Install groups, then tables, on a switch with empty state.

        Groups go first so that no entry ever points at a missing group.
        Returns how long each part took (seconds), for the run record.
        """
        t0 = time.perf_counter()
        for group in plan.groups:
            self.api.mc_mgrp_create(group.mgid)
            handle = self.api.mc_node_create(group.mgid, list(group.ports))
            self.api.mc_node_associate(group.mgid, handle)
        t1 = time.perf_counter()
        for entry in plan.entries():
            self.api.table_add(entry.table, entry.action,
                               [str(v) for v in entry.match], [str(v) for v in entry.params])
        t2 = time.perf_counter()
        return {"groups_s": t1 - t0, "tables_s": t2 - t1,
                "groups": len(plan.groups), "entries": len(plan.entries())}

    def reset_window_state(self) -> None:
        """Forget every stream's window progress (needed after N or a spec changes)."""
        for name in REGISTERS:
            self.api.register_reset(name)

    def stream_counters(self, stream_ids: Sequence[int], ports: Sequence[int]) -> dict[str, Any]:
        """Per-stream accepted/sent/dropped packet counts and per-port sent counts."""
        out: dict[str, Any] = {"streams": {}, "ports": {}}
        for sid in stream_ids:
            drops = {name: self.api.counter_read("stream_drops", sid * DROP_SLOTS + code)[1]
                     for name, code in DROP_CODES.items()}
            out["streams"][sid] = {
                "in": self.api.counter_read("stream_in", sid)[1],
                "out": self.api.counter_read("stream_out", sid)[1],
                "dropped": drops,
            }
        for port in ports:
            out["ports"][port] = self.api.counter_read("operator_out", port)[1]
        out["non_event"] = self.api.counter_read("non_event", 0)[1]
        return out

