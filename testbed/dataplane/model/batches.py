"""Batches: several events of one stream in one frame (docs/wire.md, "Batches").

The switch takes a batch's events one by one, in frame order, through the
same per-event steps as a frame that carries one (``Forwarding.assign``), so
window state, lateness and changes apply per event.  The frame is then
replicated once, to the operators of a range of windows that covers every
event's windows, and each replica keeps only the events whose windows are
its operator's, each with its Windows header.  A replica left with no event
is dropped.

Why a covering range: the destination tables already map a range of
windows (the newest one's operator and how many) to a port or a group, so
a batch needs no new kind of group.  Within an epoch, round-robin windows
are consecutive, so the range from the batch's oldest window to its newest
holds them all; an operator in it that owns none of them gets a replica
that egress drops.  The control plane installs every range for a batched
stream (``plan.stream_destination_pairs``).  A batch's events lie in at
most two epochs (the one in force and the one before it), because the
control plane arms a change only after the previous transition is over,
and a change cannot begin inside a packet that still needs the epoch before
last; the union of the two ranges is the transition table's.

A batch that lies inside one slide (a time batch also in order) needs no
per-event steps past its first event (``_whole_slide``): all its events lie
in the first one's windows, so the step only moves the stream's position
(event count or newest timestamp) and the counters on, as the P4 program's
one pass does (p4/batches.p4, BATCH_WHOLE_SLIDE).  Its destination is then
the first event's, and each replica holds all its events or none, with one
Windows header for all (``_whole_replica``): what the range and the
per-event replica would give, for one event's work.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from testbed.dataplane.contract import COUNT_STATE
from testbed.dataplane.model.counts import pack
from testbed.dataplane.model.egress import Address, Replica
from testbed.dataplane.model.metadata import CopyMeta, Decision, WindowParams
from testbed.dataplane.wire import (
    BATCH_LEN,
    BATCH_STRUCT,
    BATCH_UDP_PORT,
    EVENT_LEN,
    EVENT_OFFSET,
    EVENT_STRUCT,
    FLAG_WINDOWS,
    WINDOWS_STRUCT,
    with_payload,
)

#: Where ``span`` and ``old_span`` sit among a Windows header's fields.
SPAN, OLD_SPAN = 1, 5
#: The byte of an event that holds ``FLAG_WINDOWS``: the low one of its
#: big-endian flags (bytes 2 and 3).
FLAGS_LOW_BYTE = 3
assert FLAG_WINDOWS < 0x100
#: That byte with ``FLAG_WINDOWS`` set, for each of its values (``bytes.translate``).
WITH_FLAG_WINDOWS = bytes(b | FLAG_WINDOWS for b in range(256))


@dataclass
class WindowRange:
    """Windows ``lo`` .. ``hi`` (global ids) of one epoch, ``hi`` on operator ``hi_op``."""

    lo: int
    hi: int
    hi_op: int

    def count(self, n_ops: int) -> int:
        """Operators the range covers: all N once it holds N windows."""
        return min(self.hi - self.lo + 1, n_ops)


@dataclass
class Cover:
    """The windows a batch's events lie in, as one range per epoch: the
    epoch in force (``new``) and the one before it (``old``)."""

    epoch: int
    new: Optional[WindowRange] = None
    old: Optional[WindowRange] = None
    n_ops: int = 0
    old_n_ops: int = 0
    opset: int = 0

    def add(self, copy: CopyMeta) -> None:
        v = copy.verdict
        if copy.by_key:
            # A stream split by key never changes: its range is of operator indices.
            self._new(copy.key_op, copy.key_op, copy.key_op, copy)
            return
        if v.active:
            self._new(v.window - v.active + 1, v.window, v.newest, copy)
        if v.old_active:
            self._old(v.old_window - v.old_active + 1, v.old_window, v.old_newest, copy.old_n_ops)

    def _new(self, lo: int, hi: int, hi_op: int, copy: CopyMeta) -> None:
        if copy.epoch == self.epoch:
            self.n_ops, self.opset = copy.n_ops, copy.opset
            self.new = widen(self.new, lo, hi, hi_op)
        else:
            # An event before the change's boundary, in the epoch that is now the previous one.
            self._old(lo, hi, hi_op, copy.n_ops)

    def _old(self, lo: int, hi: int, hi_op: int, n_ops: int) -> None:
        self.old_n_ops = n_ops
        self.old = widen(self.old, lo, hi, hi_op)


def widen(span: Optional[WindowRange], lo: int, hi: int, hi_op: int) -> WindowRange:
    """``span`` grown to hold windows ``lo`` .. ``hi`` (a new range if there is none)."""
    if span is None:
        return WindowRange(lo, hi, hi_op)
    span.lo = min(span.lo, lo)
    if hi > span.hi:
        span.hi, span.hi_op = hi, hi_op
    return span


class Batches:
    """A batch frame through the switch: per-event ingress, one replication,
    per-replica egress (over ``Forwarding``, ``Egress`` and the state)."""

    #: Take a count batch inside one slide at once (``_whole_slide``), as the
    #: P4 program does; off, every event goes through ingress in turn.
    whole_slides: bool = True

    def process_batch(self, frame: bytes, count: int) -> list[tuple[int, bytes]]:
        """Frames to send for a frame to the batch port that holds ``count``
        events (``wire.batch_count``: 0 for a malformed one, which is not an event)."""
        first = EVENT_OFFSET + BATCH_LEN
        body = frame[first:first + count * EVENT_LEN]
        events = list(EVENT_STRUCT.iter_unpack(body))
        # One stream: every event's first two bytes (its stream id) are the first one's.
        if not events or body[0::EVENT_LEN] != body[0:1] * count or body[1::EVENT_LEN] != body[1:2] * count:
            self._count("non_event", 0, len(frame))
            return []
        stream = events[0][0]
        copies: list[tuple[int, CopyMeta]] = []
        tables: dict = {}          # lookups kept for the batch; bmv2 repeats them in each pass
        # What BoundaryCheck reads before the first event: the epoch and the transition.
        before = (self.registers["epoch"][stream], self.registers["in_transition"][stream])
        whole = False
        for i, (_stream, _flags, _seq, ts, key, _value) in enumerate(events):
            copy = self.assign(stream, ts, len(frame), key, tables)
            if not isinstance(copy, Decision):
                # A batch's events are counted as each is taken (batches.p4).
                self._count("stream_in", stream, len(frame))
                copies.append((i, copy))
                if i == 0 and self.whole_slides and self._whole_slide(stream, copy, events, before, len(frame),
                                                                      tables):
                    whole = True
                    break
        if not copies:
            return []
        if whole:
            # Every event lies in the first one's windows: the destination is the first one's.
            decision = self._to(self._destination_of(stream, copy), stream, len(frame), copy)
            self._drop_rest(stream, decision, count - 1, len(frame))
        else:
            decision = self._batch_destination(stream, copies, len(frame))
        out = []
        final_epoch = self.registers["epoch"][stream]
        marked = marked_events(body)
        for replica, address in self.addressed(self.replicate(decision)):
            if whole:
                sent = self._whole_replica(frame, stream, replica, address, copy, final_epoch, marked)
            else:
                sent = self._batch_replica(frame, stream, replica, address, copies, final_epoch, marked)
            if sent is not None:
                out.append((replica.port, sent))
        return out

    def _whole_slide(self, stream: int, first: CopyMeta, events: list[tuple], before: tuple[int, int],
                     nbytes: int, tables: dict) -> bool:
        """BATCH_WHOLE_SLIDE (p4/batches.p4): whether every event of a batch
        lies in exactly the windows of its ``first``, which has just been
        taken.  It does when they all fall into the first one's slide, on the
        same side of the slide's ``extra`` point (where the number of windows
        holding an event drops by one), and no change is switching or in
        transition, because an armed change fires only at the next slide.  A
        time batch must also be in order from a first event that was not
        late: then none of its events is late, and none reaches the next
        slide before the last (``events``: the batch's unpacked events).
        Then the rest of the batch is taken at once: the stream's position
        (its event count, or its newest timestamp) moves to the last event,
        and each event is counted in ``stream_in``, which is all that taking
        them one by one would write."""
        epoch_before, in_transition = before
        count = len(events)
        if count < 2 or first.by_key or in_transition or first.epoch != epoch_before or first.verdict.old_active:
            return False
        spec = WindowParams.of(*self._hit("window_spec", (stream, first.bank), tables))
        regs = self.registers
        if spec.is_count:
            following = regs["event_count"][stream]
            first_x, last = following - 1, following + count - 2
        else:
            stamps = [e[3] for e in events]
            first_x, last = stamps[0], stamps[-1]
            if regs["last_ts"][stream] != first_x or any(b < a for a, b in zip(stamps, stamps[1:])):
                return False
        slide_start = regs["slide_start"][stream]
        if last >= regs["next_start"][stream] or \
                (first_x - slide_start < spec.extra) != (last - slide_start < spec.extra):
            return False
        if spec.is_count:
            regs["event_count"][stream] = last + 1
            regs[COUNT_STATE][stream] = pack(last + 1 - slide_start, regs["newest_op"][stream])
        else:
            regs["last_ts"][stream] = last
        self._count("stream_in", stream, nbytes, count - 1)
        return True

    def _batch_destination(self, stream: int, copies: list[tuple[int, CopyMeta]], nbytes: int) -> Decision:
        """One destination for the batch: the range covering its events' windows."""
        cover = Cover(self.registers["epoch"][stream])
        for _i, copy in copies:
            cover.add(copy)
        new = cover.new.count(cover.n_ops) if cover.new else 0
        if cover.old is None:
            hit = self._destination(cover.opset, cover.new.hi_op, new)
        else:
            hit = self.tables["handover"].get((stream, cover.old.hi_op, cover.old.count(cover.old_n_ops),
                                               cover.new.hi_op if new else 0, new))
        decision = self._to(hit, stream, nbytes, copies[-1][1])
        self._drop_rest(stream, decision, len(copies) - 1, nbytes)
        return decision

    def _drop_rest(self, stream: int, decision: Decision, rest: int, nbytes: int) -> None:
        """A batch whose destination missed: the drop of its first event is
        counted (``_to``), and so is each of the ``rest``."""
        if decision.drop is not None:
            for _more in range(rest):
                self._drop(stream, decision.drop, nbytes)

    def _header_here(self, stream: int, replica: Replica, copy: CopyMeta, positions: dict,
                     final_epoch: int) -> Optional[bytes]:
        """The Windows header of ``copy``'s event in ``replica``, or None when
        none of its windows is that operator's."""
        fields = self._windows_fields(stream, replica, copy, positions, superseded=copy.epoch != final_epoch)
        if copy.by_key:
            hit = self._hit("operator_position", (copy.opset, *replica), positions)
            mine = hit is not None and hit[1][0] == copy.key_op
        else:
            mine = fields[SPAN] > 0 or fields[OLD_SPAN] > 0
        return WINDOWS_STRUCT.pack(*fields, 0) if mine else None

    def _batch_replica(self, frame: bytes, stream: int, replica: Replica, address: Address,
                       copies: list[tuple[int, CopyMeta]], final_epoch: int, marked: list[bytes]) -> Optional[bytes]:
        """``replica`` as it leaves: the events whose windows are its operator's,
        each followed by its Windows header; None if there is none.
        ``marked``: the batch's events as a replica carries them."""
        parts: list[bytes] = []                      # the kept events and their headers, in frame order
        positions: dict = {}
        for i, copy in copies:
            header = self._header_here(stream, replica, copy, positions, final_epoch)
            if header is not None:
                parts += (marked[i], header)
        if not parts:
            return None
        return self._replica(frame, stream, address, len(parts) // 2, b"".join(parts))

    def _whole_replica(self, frame: bytes, stream: int, replica: Replica, address: Address, copy: CopyMeta,
                       final_epoch: int, marked: list[bytes]) -> Optional[bytes]:
        """``_batch_replica`` for a whole slide: every event shares ``copy``'s
        windows, so the replica holds all of them or none, each with the same
        Windows header."""
        header = self._header_here(stream, replica, copy, {}, final_epoch)
        if header is None:
            return None
        return self._replica(frame, stream, address, len(marked), header.join(marked) + header)

    def _replica(self, frame: bytes, stream: int, address: Address, kept: int, events: bytes) -> bytes:
        """The replica for ``address`` of ``frame`` that carries ``kept`` events
        (``events``: each followed by its Windows header), through egress."""
        payload = BATCH_STRUCT.pack(kept, FLAG_WINDOWS) + events
        # Counted once per event, at the length the frame arrived with, as
        # egress.p4 counts packet_length once per event it keeps.
        self._count("stream_out", stream, len(frame), kept)
        self._count("operator_out", address.instance, len(frame), kept)
        return self.egress(address, with_payload(frame, payload, BATCH_UDP_PORT, checksum=False))


def marked_events(body: bytes) -> list[bytes]:
    """A batch's events (``body``, the bytes after its header) as its
    replicas carry them: each on its own, ``FLAG_WINDOWS`` set in its flags.
    Made once per batch, for every replica."""
    flagged = bytearray(body)
    flagged[FLAGS_LOW_BYTE::EVENT_LEN] = flagged[FLAGS_LOW_BYTE::EVENT_LEN].translate(WITH_FLAG_WINDOWS)
    return [flagged[at:at + EVENT_LEN] for at in range(0, len(flagged), EVENT_LEN)]
