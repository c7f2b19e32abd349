"""Ingress and replication (p4/forwarding.p4): which operators an event goes to.

The bank in force, its spec and N, the slide tracker's outcome, then one of
the unicast, multicast and transition (handover) tables; the packet
replication engine turns a group into ports.
"""
from __future__ import annotations

from typing import Optional

from testbed.dataplane.contract import UNKNOWN_STREAM, drop_counter_index
from testbed.dataplane.model.egress import Replica
from testbed.dataplane.model.metadata import CopyMeta, Decision, PreviousParams, WindowParams
from testbed.dataplane.wire import (
    EVENT_OFFSET,
    EVENT_STRUCT,
    batch_count,
    is_batch_port,
    is_event_frame,
    is_heartbeat_frame,
)
from testbed.semantics.splitting import key_operator


class Forwarding:
    """MyIngress and the PRE over the state (``ControlState``), and the whole switch on one frame."""

    def ingress(self, stream: int, ts: int, nbytes: int = 0, key: int = 0) -> Decision:
        """MyIngress (forwarding.p4): the event's windows (``assign``), then one
        of the unicast, multicast and transition tables."""
        copy = self.assign(stream, ts, nbytes, key)
        if isinstance(copy, Decision):
            return copy
        decision = self._to(self._destination_of(stream, copy), stream, nbytes, copy)
        if decision.drop is None:
            # Counted by the destination table that sends it on (forwarding.p4,
            # COUNT_SENT_ON): an event no entry routes is counted only as dropped.
            self._count("stream_in", stream, nbytes)
        return decision

    def _destination_of(self, stream: int, copy: CopyMeta):
        """The destination table's hit for the windows of one event (or of a
        batch that lies in exactly those): the unicast, multicast or
        transition table's entry, None on a miss."""
        verdict = copy.verdict
        active = min(verdict.active, copy.n_ops)   # with N or more windows open every operator is hit once
        old_active = min(verdict.old_active, copy.old_n_ops) if verdict.old_active else 0
        if copy.by_key:
            # One copy, to the key's operator by its index: the one-window
            # path of forwarding.p4.  Such a stream never changes.
            return self._destination(copy.opset, copy.key_op, 1)
        if old_active == 0:
            return self._destination(copy.opset, verdict.newest, active)
        # Old windows, and new ones unless active is 0: their union.
        newest = verdict.newest if active else 0
        return self.tables["handover"].get((stream, verdict.old_newest, old_active, newest, active))

    def assign(self, stream: int, ts: int, nbytes: int = 0, key: int = 0,
               tables: Optional[dict] = None) -> "CopyMeta | Decision":
        """The first half of MyIngress, per event: the bank in force (or the
        other one, at an armed change's boundary), its spec and N, and the
        slide tracker's windows; or the drop, counted.  The event is counted
        in ``stream_in`` by the caller: once it is sent on (``ingress``), or
        once it is taken, for a batch's.  ``tables`` keeps the
        lookups of a batch's configuration tables, which all its events share."""
        switching = self._at_boundary(stream, ts)
        epoch = (self.registers["epoch"][stream] + switching) & 0xFFFFFFFF
        bank = epoch & 1
        prev = None
        if switching or self.registers["in_transition"][stream]:
            prev_entry = self._hit("previous_spec", (stream,), tables)
            if prev_entry is None:
                return self._drop(stream, UNKNOWN_STREAM, nbytes)
            prev = PreviousParams(*prev_entry[1])
        spec = self._hit("window_spec", (stream, bank), tables)
        n_ops_entry = self._hit("operator_count", (stream, bank), tables)
        if spec is None or n_ops_entry is None:
            return self._drop(stream, UNKNOWN_STREAM, nbytes)
        n_ops, opset = n_ops_entry[1]
        by_key = n_ops_entry[0] == "split_by_key"
        verdict = self._track(stream, ts, WindowParams.of(*spec), n_ops, prev, switching)
        if isinstance(verdict, str):
            return self._drop(stream, verdict, nbytes)
        return CopyMeta(bank, epoch, verdict, n_ops, prev.n_ops if verdict.old_active else 0, opset, by_key,
                        key_operator(key, n_ops) if by_key else 0)

    def _to(self, hit, stream: int, nbytes: int, copy: CopyMeta) -> Decision:
        """A destination table's hit as the decision for ``copy``; a miss drops."""
        if hit is None:
            return self._drop(stream, UNKNOWN_STREAM, nbytes)
        action, (value,) = hit
        if action == "to_operator":
            return Decision(port=value, copy=copy)
        return Decision(mgid=value, copy=copy)

    def _destination(self, opset: int, newest: int, active: int):
        """unicast for one window, multicast for more, in the operator set's entries."""
        if active == 1:
            return self.tables["unicast"].get((opset, newest))
        return self.tables["multicast"].get((opset, newest, active))

    def _drop(self, stream: int, reason: str, nbytes: int) -> Decision:
        self._count("stream_drops", drop_counter_index(stream, reason), nbytes)
        return Decision(drop=reason)

    def replicate(self, decision: Decision) -> list[Replica]:
        """The copies a decision makes (the PRE's job for multicast): one of
        rid 0 for unicast, and one per port of each of the group's nodes."""
        if decision.port is not None:
            return [Replica(decision.port, 0)]
        copies: list[Replica] = []
        if decision.mgid is not None:
            for handle in self.mc_groups.get(decision.mgid, ()):
                rid, ports = self.mc_nodes[handle]
                copies.extend(Replica(port, rid) for port in ports)
        return copies

    def process(self, frame: bytes, in_port: int = 0) -> list[tuple[int, bytes]]:
        """Frames to send, as ``(egress port, bytes)``, for one frame received on ``in_port``."""
        if not is_event_frame(frame):
            count = batch_count(frame)
            if count or is_batch_port(frame):
                return self.process_batch(frame, count)
            if is_heartbeat_frame(frame):
                self._count("heartbeats", in_port, len(frame))
            else:
                self._count("non_event", 0, len(frame))
            return []
        event = EVENT_STRUCT.unpack_from(frame, EVENT_OFFSET)
        stream, _f, _seq, ts, key, _v = event
        decision = self.ingress(stream, ts, len(frame), key)
        # The CEP stage sees every event, whatever the splitter does with it;
        # its frames to the sinks are an I2E clone's, enqueued first (p4/cep.p4).
        out = self.cep(frame, event) if self.cep_on else []
        for replica, address in self.addressed(self.replicate(decision)):
            windows = self._windows_header(stream, replica, decision.copy)
            # Counted at the length the frame arrived with, as bmv2
            # counts packet_length before the deparser grows the copy.
            self._count("stream_out", stream, len(frame))
            self._count("operator_out", address.instance, len(frame))
            out.append((replica.port, self.egress(address, frame, windows)))
        return out
