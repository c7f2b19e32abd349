"""Egress (p4/egress.p4): each copy addressed to its host and given its Windows header."""
from __future__ import annotations

from typing import NamedTuple, Optional

from testbed.dataplane.contract import U64, WINDOWS_BACK_UNIT
from testbed.dataplane.model.metadata import CopyMeta
from testbed.dataplane.wire import WINDOWS_STRUCT, insert_windows_header, readdress


def copy_back(newest: int, n_ops: int, position: int) -> int:
    """How far back from the event's newest window this copy's newest lies:
    ``(newest - position) mod N`` without division, as egress.p4 does it."""
    return newest - position if newest >= position else newest + n_ops - position


class Replica(NamedTuple):
    """One copy as the PRE makes it: the port it leaves on and its node's rid
    (0 for unicast)."""
    port: int
    rid: int

    @property
    def instance(self) -> int:
        """The operator instance it is for: its rid, or its port where that is
        0 (``testbed.semantics.instances``); egress learns it from the
        egress_rewrite entry keyed on both."""
        return self.rid or self.port


class Address(NamedTuple):
    """egress_rewrite's action data for a copy: where it goes, and the operator
    instance it is for, which operator_out counts and cep_sinks is indexed by."""
    mac: int
    ip: int
    instance: int


class Egress:
    """The Windows header of a copy, and the rewrite of its addresses."""

    def _windows_header(self, stream: int, replica: Replica, copy: CopyMeta) -> bytes:
        """The Windows header of ``replica``, a copy for one operator (egress.p4)."""
        return WINDOWS_STRUCT.pack(*self._windows_fields(stream, replica, copy), 0)

    def _windows_fields(self, stream: int, replica: Replica, copy: CopyMeta,
                        positions: Optional[dict] = None, superseded: bool = False) -> tuple[int, ...]:
        """The Windows header's fields for ``replica``: the event's windows whose
        operator stands at its instance's position, in the epoch in force and in
        the previous one.  ``positions`` keeps a batch's position lookups.
        ``superseded``: the event is of a batch whose later events begin a
        new epoch, so its own epoch is now the previous one, whose positions
        previous_position holds (batches.p4 looks each position table up once
        per copy)."""
        v = copy.verdict
        if copy.by_key:
            return v.window, v.active, 1, copy.epoch & 0xFFFF, 0, 0, 0
        window = span = old_window = old_span = 0
        if v.active:
            if positions is None:
                back = self._back_of_event(replica, copy)
            else:
                if superseded:
                    hit = self._hit("previous_position", (stream, *replica), positions)
                else:
                    hit = self._hit("operator_position", (copy.opset, *replica), positions)
                back = None if hit is None else copy_back(v.newest, copy.n_ops, hit[1][0])
            if back is not None and back < v.active:
                window, span = (v.window - back) & U64, v.active - back
        if v.old_active:
            old_hit = self._hit("previous_position", (stream, *replica), positions)
            if old_hit is not None:
                back = copy_back(v.old_newest, copy.old_n_ops, old_hit[1][0])
                if back < v.old_active:
                    old_window, old_span = (v.old_window - back) & U64, v.old_active - back
        return (window, span, copy.n_ops & 0xFFFF, copy.epoch & 0xFFFF,
                old_window, old_span, copy.old_n_ops & 0xFFFF)

    def _back_of_event(self, replica: Replica, copy: CopyMeta) -> Optional[int]:
        """How many windows back from the event's newest ``replica``'s operator's
        newest lies, for a frame of one event; None where it has no place in
        the operator set.  The one copy of an event in one window (clamped),
        outside a transition, is the newest's operator's: 0, with no lookup
        (egress.p4).  Otherwise the operator_back entry of the (operator set,
        newest operator) that chose the copy's group says, whichever table
        the build looks up (operator_position, in the builds without it,
        gives the same back)."""
        v = copy.verdict
        if min(v.active, copy.n_ops) == 1 and not v.old_active:
            return 0
        hit = self.tables["operator_back"].get((copy.opset, v.newest, *replica))
        if hit is None:
            return None
        action, params = hit
        return params[3] // WINDOWS_BACK_UNIT if action == "rewrite_back" else 0

    def addressed(self, copies: list[Replica]) -> list[tuple[Replica, Address]]:
        """The copies, as the PRE makes them, that egress_rewrite addresses:
        each with the table's action data.  A copy without an entry is
        dropped (egress.p4)."""
        out = []
        for replica in copies:
            hit = self.tables["egress_rewrite"].get(tuple(replica))
            if hit is not None:
                out.append((replica, Address(*hit[1])))
        return out

    def egress(self, address: Address, frame: bytes, windows: Optional[bytes] = None) -> bytes:
        """MyEgress: address the copy to its operator instance and, for a copy
        of an event, insert its Windows header after the event header."""
        copy = insert_windows_header(frame, windows) if windows is not None else frame
        return readdress(copy, address.mac, address.ip)
